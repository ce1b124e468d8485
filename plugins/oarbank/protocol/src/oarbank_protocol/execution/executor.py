"""Run one protocol operation safely: ``<exec...> <op> [args]`` → one typed document.

What "safely" means here, and why:

* Exactly the spec's environment (:mod:`oarbank_protocol.execution.environment`), cwd the bundle root,
  stdin ``/dev/null``, a new session per call so the whole op can be killed as a group.
* Per-op timeouts from the spec's table, overridable. On timeout the process group, its
  descendants and anything still holding our stdout pipe are SIGKILLed. Waiting for pipe EOF
  is always bounded: a grandchild that keeps stdout open cannot hang the agent.
* stdout is capped (1 MiB; ``list_owned`` 16 MiB because it scales with the number of
  objects); past the cap the op is killed, so the child never blocks on a full pipe and we
  never buffer 100 MB. stderr keeps a 64 KiB tail for error messages.
* Parsing is strict (:func:`documents.parse_document`), exit 0 does not rescue a malformed
  document, and non-zero exits become :class:`~oarbank_protocol.errors.OpFailed` with the module's
  error document when it printed one.

There is no thread per call: one small state machine (:class:`_OpRun`) is driven either by
the asyncio loop (``add_reader`` on the pipes plus a pidfd for the exit) or, for the sync API,
by a ``selectors`` loop. Calls for different services can run concurrently on one loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from oarbank_protocol.documents import Document, ErrorDocument, Parsed, excerpt, parse_document
from oarbank_protocol.errors import (
    BadInterpreter,
    DocumentError,
    DocumentSchemaError,
    DocumentSyntaxError,
    ExecError,
    ExecutableIsDirectory,
    ExecutableMissing,
    InvalidDocument,
    MalformedResponse,
    NotExecutable,
    OpFailed,
    OpTimeout,
    OutputTooLarge,
    TextFileBusy,
)
from oarbank_protocol.execution.environment import ExecContext, build_env, prepare_files
from oarbank_protocol.execution.process_control import kill_op_tree, pipe_inode
from oarbank_protocol.execution.redaction import Redactor

log = logging.getLogger(__name__)

MIB: Final = 1024 * 1024

DEFAULT_TIMEOUTS: Final[Mapping[str, float]] = {
    "fingerprint": 5.0,
    "start": 120.0,
    "stop": 120.0,
    "status": 5.0,
    "ready": 5.0,
    "list_owned": 5.0,
    "destroy": 60.0,
}
"""The spec's per-op timeouts in seconds (service-protocol-1, "Op" table)."""

_READ_CHUNK: Final = 65536


@dataclass(frozen=True)
class ExecLimits:
    """Output caps and grace periods; defaults follow the fault matrix's numbers."""

    stdout_cap: int = MIB
    stdout_cap_per_op: Mapping[str, int] = field(default_factory=lambda: {"list_owned": 16 * MIB})
    stderr_tail: int = 64 * 1024
    drain_grace_s: float = 1.0
    """After the op exits, how long we wait for the pipes to reach EOF before giving up."""
    kill_grace_s: float = 1.0
    """After SIGKILL, how long we keep reading and wait for the exit before moving on."""
    etxtbsy_retries: int = 5
    etxtbsy_delay_s: float = 0.2

    def cap_for(self, op: str) -> int:
        return self.stdout_cap_per_op.get(op, self.stdout_cap)


@dataclass(frozen=True)
class ExecResult:
    """What one run produced, before interpretation. ``stderr_tail`` is already redacted."""

    op: str
    argv: tuple[str, ...]
    exit_code: int | None
    stdout: bytes
    stderr_tail: str
    duration_s: float
    timeout_s: float
    timed_out: bool = False
    output_too_large: bool = False
    pipe_held: bool = False
    pid: int = 0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.output_too_large


class _OpRun:
    """The state of one running op; the drivers feed it readiness events and the time.

    Transitions: running → (exited | killed on timeout | killed on output cap) → draining
    (bounded) → done. ``done`` never depends on the child cooperating.
    """

    def __init__(
        self, proc: subprocess.Popen[bytes], timeout_s: float, limits: ExecLimits, cap: int
    ) -> None:
        assert proc.stdout is not None
        assert proc.stderr is not None
        self.proc = proc
        self.limits = limits
        self.cap = cap
        self.started = time.monotonic()
        self.deadline = self.started + timeout_s
        self.out_fd = proc.stdout.fileno()
        self.err_fd = proc.stderr.fileno()
        os.set_blocking(self.out_fd, False)
        os.set_blocking(self.err_fd, False)
        self.inodes = {i for i in (pipe_inode(self.out_fd), pipe_inode(self.err_fd)) if i}
        self.open_fds: set[int] = {self.out_fd, self.err_fd}
        #: Finished with, but not closed yet: a driver closes them (``release``) only after
        #: unregistering them, because a closed descriptor number is reused at once by the
        #: next op of the same loop, and unregistering it then would silence that other op.
        self.finished_fds: set[int] = set()
        self.pidfd: int | None = None
        with contextlib.suppress(OSError, AttributeError):
            self.pidfd = os.pidfd_open(proc.pid)
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.exited_at: float | None = None
        self.killed_at: float | None = None
        self.timed_out = False
        self.too_large = False
        self.pipe_held = False
        self.gave_up = False

    # -- events

    def watched(self) -> set[int]:
        fds = set(self.open_fds)
        if self.pidfd is not None and self.exited_at is None:
            fds.add(self.pidfd)
        return fds

    def on_readable(self, fd: int) -> None:
        if fd == self.pidfd:
            self._check_exit()
            return
        if fd not in self.open_fds:
            return
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._close_fd(fd)
            return
        if fd == self.out_fd:
            if self.too_large:
                return
            room = self.cap + 1 - len(self.stdout)
            self.stdout += chunk[:room]
            if len(self.stdout) > self.cap:
                self.too_large = True
                self.kill()
        else:
            self.stderr += chunk
            if len(self.stderr) > 2 * self.limits.stderr_tail:
                del self.stderr[: -self.limits.stderr_tail]

    def poll(self, now: float) -> None:
        """Apply every time-based transition that is due at ``now``."""
        self._check_exit()
        if self.exited_at is None and self.killed_at is None and now >= self.deadline:
            self.timed_out = True
            self.kill()
        if self.open_fds and now >= self._drain_deadline():
            self.pipe_held = True
            for fd in list(self.open_fds):
                self._close_fd(fd)
        if (
            self.exited_at is None
            and self.killed_at is not None
            and now >= self.killed_at + self.limits.kill_grace_s + 1.0
        ):
            # SIGKILL did not take (D state): move on; Popen's own cleanup reaps it later.
            self.gave_up = True

    def wake_at(self) -> float:
        times = [self._drain_deadline()] if self.open_fds else []
        if self.exited_at is None:
            if self.killed_at is None:
                times.append(self.deadline)
            else:
                times.append(self.killed_at + self.limits.kill_grace_s + 1.0)
            if self.pidfd is None:
                times.append(time.monotonic() + 0.02)
        return min(times) if times else time.monotonic()

    def done(self) -> bool:
        return (self.exited_at is not None or self.gave_up) and not self.open_fds

    # -- actions

    def kill(self) -> None:
        if self.killed_at is not None:
            return
        self.killed_at = time.monotonic()
        kill_op_tree(self.proc.pid, self.inodes)

    def close(self) -> None:
        for fd in list(self.open_fds):
            self._close_fd(fd)
        self.release()
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    # -- helpers

    def _drain_deadline(self) -> float:
        if self.killed_at is not None:
            return self.killed_at + self.limits.kill_grace_s
        if self.exited_at is not None:
            return self.exited_at + self.limits.drain_grace_s
        return self.deadline + self.limits.kill_grace_s

    def _check_exit(self) -> None:
        if self.exited_at is None and self.proc.poll() is not None:
            self.exited_at = time.monotonic()  # the pidfd leaves watched(); release closes it

    def _close_fd(self, fd: int) -> None:
        if fd in self.open_fds:
            self.open_fds.discard(fd)
            self.finished_fds.add(fd)

    def release(self) -> None:
        """Close what the driver no longer watches (call only after unregistering it)."""
        for fd in self.finished_fds:
            stream = self.proc.stdout if fd == self.out_fd else self.proc.stderr
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.finished_fds.clear()
        if self.exited_at is not None and self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None


def _rewatch(
    run: _OpRun, registered: set[int], watch: Callable[[int], object], drop: Callable[[int], object]
) -> set[int]:
    """Watch what ``run`` waits on now: descriptors it is done with are dropped before it
    releases (closes) them, new ones watched. Returns the set now watched."""
    wanted = run.watched()
    for fd in registered - wanted:
        drop(fd)
    run.release()
    for fd in wanted - registered:
        watch(fd)
    return wanted


def _drive_sync(run: _OpRun) -> None:
    selector = selectors.DefaultSelector()
    registered: set[int] = set()
    try:
        while not run.done():
            registered = _rewatch(
                run,
                registered,
                lambda fd: selector.register(fd, selectors.EVENT_READ),
                selector.unregister,
            )
            timeout = max(0.0, run.wake_at() - time.monotonic())
            if registered:
                for key, _ in selector.select(timeout):
                    run.on_readable(int(key.fd))
            else:
                time.sleep(min(timeout, 0.02))
            run.poll(time.monotonic())
    finally:
        for fd in registered:
            with contextlib.suppress(KeyError, ValueError, OSError):
                selector.unregister(fd)
        selector.close()


async def _drive_async(run: _OpRun) -> None:
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()
    registered: set[int] = set()

    def readable(fd: int) -> None:
        run.on_readable(fd)
        wake.set()

    try:
        while not run.done():
            registered = _rewatch(
                run, registered, lambda fd: loop.add_reader(fd, readable, fd), loop.remove_reader
            )
            timeout = max(0.0, run.wake_at() - time.monotonic())
            if not wake.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await wake.wait()
            wake.clear()
            run.poll(time.monotonic())
    except asyncio.CancelledError:
        # Whoever awaited us gave up: the op must not outlive the call.
        run.kill()
        raise
    finally:
        for fd in registered:
            loop.remove_reader(fd)


def resolve_executable(argv0: str, bundle_root: Path, search_path: str, op: str) -> str:
    """Absolute path of the executable, or the precise reason it cannot be run."""
    if "/" not in argv0:
        found = shutil.which(argv0, path=search_path)
        if found is None:
            raise ExecutableMissing(op, argv0, f"not found on PATH ({search_path})")
        return found
    path = Path(argv0)
    if not path.is_absolute():
        path = bundle_root / path
    if not path.exists():
        raise ExecutableMissing(op, str(path), "no such file")
    if path.is_dir():
        raise ExecutableIsDirectory(op, str(path), "is a directory")
    if not os.access(path, os.X_OK):
        raise NotExecutable(op, str(path), "not executable (no execute permission)")
    return str(path)


D = TypeVar("D", bound=Document)


class Executor:
    """Runs one service's (or probe's) executable; cheap to share, safe to call concurrently.

    ``service`` is the name given to the executable as ``OARBANK_SERVICE``. Timeouts: the
    spec's table, then the ``timeouts`` mapping (e.g. built from the manifest), then the
    ``timeout_s`` argument of a single call.
    """

    def __init__(
        self,
        exec_argv: Sequence[str],
        context: ExecContext,
        *,
        service: str,
        timeouts: Mapping[str, float] | None = None,
        limits: ExecLimits | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        if not exec_argv:
            raise ValueError("exec must name an executable")
        self.exec_argv = tuple(exec_argv)
        self.context = context
        self.service = service
        self.limits = limits or ExecLimits()
        self.timeouts = {**DEFAULT_TIMEOUTS, **(timeouts or {})}
        self.redactor = redactor or Redactor.from_settings(
            context.settings,
            extra_keys=context.secret_keys,
            extra_values=context.secret_values,
        )
        prepare_files(context)
        self.env = build_env(context, service)
        self._warned_unknown: set[tuple[str, tuple[str, ...]]] = set()

    # -- public API

    def timeout_for(self, op: str) -> float:
        return self.timeouts.get(op, DEFAULT_TIMEOUTS["fingerprint"])

    def argv_for(self, op: str, args: Sequence[str] = ()) -> list[str]:
        return [*self.exec_argv, op, *args]

    async def run_raw(self, op: str, *args: str, timeout_s: float | None = None) -> ExecResult:
        """Run and collect; raises only when the executable cannot be started at all."""
        timeout = timeout_s if timeout_s is not None else self.timeout_for(op)
        argv = self.argv_for(op, args)
        proc = None
        for attempt in range(self.limits.etxtbsy_retries + 1):
            proc = self._spawn(op, argv, last_try=attempt == self.limits.etxtbsy_retries)
            if proc is not None:
                break
            await asyncio.sleep(self.limits.etxtbsy_delay_s)
        assert proc is not None
        run = _OpRun(proc, timeout, self.limits, self.limits.cap_for(op))
        try:
            await _drive_async(run)
        finally:
            run.close()
        return self._result(op, argv, run, timeout)

    def run_raw_sync(self, op: str, *args: str, timeout_s: float | None = None) -> ExecResult:
        """Blocking variant of :meth:`run_raw` for code without an event loop."""
        timeout = timeout_s if timeout_s is not None else self.timeout_for(op)
        argv = self.argv_for(op, args)
        proc = None
        for attempt in range(self.limits.etxtbsy_retries + 1):
            proc = self._spawn(op, argv, last_try=attempt == self.limits.etxtbsy_retries)
            if proc is not None:
                break
            time.sleep(self.limits.etxtbsy_delay_s)
        assert proc is not None
        run = _OpRun(proc, timeout, self.limits, self.limits.cap_for(op))
        try:
            _drive_sync(run)
        finally:
            run.close()
        return self._result(op, argv, run, timeout)

    async def call(
        self, op: str, model: type[D], *args: str, timeout_s: float | None = None
    ) -> Parsed[D]:
        """Run ``op`` and return its document, or raise the matching :class:`ExecError`."""
        return self.interpret(await self.run_raw(op, *args, timeout_s=timeout_s), model)

    def call_sync(
        self, op: str, model: type[D], *args: str, timeout_s: float | None = None
    ) -> Parsed[D]:
        return self.interpret(self.run_raw_sync(op, *args, timeout_s=timeout_s), model)

    def interpret(self, result: ExecResult, model: type[D]) -> Parsed[D]:
        """Turn a raw result into a document or the right exception (pure, no I/O)."""
        op, tail = result.op, result.stderr_tail
        if result.timed_out:
            raise OpTimeout(op, result.timeout_s, stderr_tail=tail)
        if result.output_too_large:
            cap = self.limits.cap_for(op)
            raise OutputTooLarge(op, cap, excerpt=self._excerpt(result.stdout), stderr_tail=tail)
        if result.exit_code != 0:
            raise self._failure(result)
        try:
            parsed = parse_document(model, result.stdout)
        except DocumentSyntaxError as exc:
            self._log_malformed(result, exc.reason)
            raise MalformedResponse(
                op, exc.reason, excerpt=self.redactor(exc.excerpt), stderr_tail=tail
            ) from None
        except DocumentSchemaError as exc:
            self._log_malformed(result, str(exc))
            raise InvalidDocument(op, exc, stderr_tail=tail) from None
        if parsed.unknown_fields:
            key = (op, parsed.unknown_fields)
            if key not in self._warned_unknown:
                self._warned_unknown.add(key)
                log.warning(
                    "%s %s: ignoring unknown fields %s (newer module?)",
                    self.service,
                    op,
                    ", ".join(parsed.unknown_fields),
                )
        return parsed

    # -- internals

    def _excerpt(self, raw: bytes) -> str:
        return self.redactor(excerpt(raw))

    def _log_malformed(self, result: ExecResult, problem: str) -> None:
        """Every malformed document is logged, whoever catches the exception later.

        A caller that only records "not healthy" (a fingerprint loop, a readiness poll) would
        otherwise leave no trace of *why*; the line names the op, the exit status and the
        first bytes of what the module printed.
        """
        shown = self._excerpt(result.stdout) if result.stdout else "(no output)"
        log.warning(
            "%s %s: malformed document (%s): %s; output starts with: %s",
            self.service,
            result.op,
            _describe_status(result.exit_code),
            self.redactor(problem),
            shown,
        )

    def _spawn(self, op: str, argv: list[str], *, last_try: bool) -> subprocess.Popen[bytes] | None:
        executable = resolve_executable(argv[0], self.context.bundle_root, self.context.path, op)
        confinement = self.context.confinement
        if confinement is not None:
            argv = confinement.argv([executable, *argv[1:]])
            executable = confinement.bwrap
        try:
            return subprocess.Popen(
                argv,
                executable=executable,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                cwd=self.context.bundle_root,
                start_new_session=True,
                close_fds=True,
                restore_signals=True,
            )
        except OSError as exc:
            cwd = str(self.context.bundle_root)
            if exc.errno == errno.ETXTBSY:
                if last_try:
                    raise TextFileBusy(
                        op, executable, "text file busy (retries exhausted)"
                    ) from None
                return None
            if exc.filename in (cwd, self.context.bundle_root):
                raise ExecutableMissing(op, cwd, "bundle root is not usable as cwd") from None
            if exc.errno == errno.ENOEXEC:
                raise BadInterpreter(
                    op, executable, "exec format error (no '#!' line or a foreign binary)"
                ) from None
            if exc.errno == errno.ENOENT:
                raise BadInterpreter(
                    op, executable, "bad interpreter (the '#!' line names a missing program)"
                ) from None
            if exc.errno == errno.EACCES:
                raise NotExecutable(op, executable, "permission denied") from None
            if exc.errno == errno.EISDIR:
                raise ExecutableIsDirectory(op, executable, "is a directory") from None
            raise ExecError(op, f"cannot run `{op}`: {exc.strerror or exc}: {executable}") from None

    def _result(self, op: str, argv: list[str], run: _OpRun, timeout: float) -> ExecResult:
        stderr_tail = bytes(run.stderr[-self.limits.stderr_tail :]).decode("utf-8", "replace")
        if run.pipe_held and not (run.timed_out or run.too_large):
            log.warning(
                "%s %s: a leftover process kept stdout/stderr open after exit; "
                "stopped reading after %.1f s (services must detach their stdio)",
                self.service,
                op,
                self.limits.drain_grace_s,
            )
        return ExecResult(
            op=op,
            argv=tuple(argv),
            exit_code=run.proc.returncode,
            stdout=bytes(run.stdout),
            stderr_tail=self.redactor(stderr_tail),
            duration_s=time.monotonic() - run.started,
            timeout_s=timeout,
            timed_out=run.timed_out,
            output_too_large=run.too_large,
            pipe_held=run.pipe_held,
            pid=run.proc.pid,
        )

    def _failure(self, result: ExecResult) -> OpFailed:
        op, code = result.op, result.exit_code
        status = _describe_status(code)
        error: ErrorDocument | None = None
        unparseable = ""
        if result.stdout.strip():
            try:
                parsed = parse_document(ErrorDocument, result.stdout)
            except DocumentError as exc:
                unparseable = self._excerpt(result.stdout)
                self._log_malformed(result, f"not an error document: {exc}")
            else:
                doc = parsed.document
                error = ErrorDocument(
                    code=doc.code,
                    msg=self.redactor(doc.msg),
                    details=self.redactor.redact_json(doc.details),
                    retryable=doc.retryable,
                )
        if error is not None:
            reason = f"`{op}` failed with error {error.code}: {error.msg}"
            if error.details:
                reason += f" ({error.details})"
            reason += f" [{status}]"
        elif unparseable:
            reason = f"`{op}` failed ({status}) with unparseable output: {unparseable}"
        else:
            reason = f"`{op}` failed with no error message: {status}"
        return OpFailed(
            op,
            code if code is not None else -1,
            reason,
            error=error,
            stderr_tail=result.stderr_tail,
        )


def _describe_status(code: int | None) -> str:
    if code is None:
        return "exit status unknown (process could not be reaped)"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exit status {code}"
