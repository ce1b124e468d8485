"""Exit notification for every child of the orchestrator, driven by SIGCHLD.

One signal handler on the event loop reaps *all* exited children with ``waitpid(-1)``: the
processes srt started (resolving their exit futures at once: no 2 s poll, no thread per
child) and the orphans re-parented to us as a child subreaper (so no zombie is left). This
requires that nothing else in the process waits for children, which is why every
subprocess srt runs, including short commands such as ``git`` or ``scancel``, goes through
:func:`run_command` here.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Mapping

from srt_services.contracts.handle import CommandResult
from srt_services.contracts.launcher import ChildWatch

ExitCallback = Callable[[int], None]


def exit_code(status: int) -> int:
    """``waitpid`` status to a shell-style code: exit N, or 128+N for death by signal N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class ChildWatcher:
    """Reaps children on SIGCHLD and dispatches exit codes to registered callbacks."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        on_error: Callable[[int, BaseException], None] | None = None,
    ) -> None:
        self.loop = loop
        self._callbacks: dict[int, ExitCallback] = {}
        self._popens: dict[int, subprocess.Popen[bytes]] = {}
        #: told about an exception raised by an exit callback (the orchestrator fails the
        #: unit loudly); without it the exception propagates to the loop's handler
        self.on_error = on_error
        loop.add_signal_handler(signal.SIGCHLD, self.reap)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.loop.remove_signal_handler(signal.SIGCHLD)
        self.reap()

    def watch(
        self, pid: int, callback: ExitCallback, popen: subprocess.Popen[bytes] | None = None
    ) -> None:
        """Call ``callback(code)`` when ``pid`` exits.

        Register right after spawning, in the loop's thread: the SIGCHLD handler runs only
        between callbacks, so no exit can be reaped before its callback is known.
        """
        self._callbacks[pid] = callback
        if popen is not None:
            self._popens[pid] = popen

    def watched_pids(self) -> set[int]:
        return set(self._callbacks)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            code = exit_code(status)
            popen = self._popens.pop(pid, None)
            if popen is not None:
                # Popen must never waitpid() this PID itself: it may belong to another child
                # by now. Recording the code makes Popen treat the process as reaped.
                popen.returncode = code
            # an orphan re-parented to us has no callback: reaping it is all it needs
            callback = self._callbacks.pop(pid, None)
            if callback is None:
                continue
            try:
                callback(code)
            except Exception as exc:
                # never let one callback's failure stop the reaping of the others, or
                # leave the exit unhandled without anyone hearing of it
                if self.on_error is None:
                    raise
                self.on_error(pid, exc)


def _popen(
    argv: list[str],
    env: Mapping[str, str] | None,
    cwd: str | None,
    stdout_path: str | None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in its own session, output appended to ``stdout_path`` or piped."""
    out_fd = None
    if stdout_path is not None:
        out_fd = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        return subprocess.Popen(
            argv,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out_fd if out_fd is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT if out_fd is not None else subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        if out_fd is not None:
            os.close(out_fd)


class _Capture:
    """Reads a child's pipes on the event loop (no thread), keeping at most ``limit`` bytes
    of each."""

    def __init__(self, popen: subprocess.Popen[bytes], limit: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.limit = limit
        self.streams = [s for s in (popen.stdout, popen.stderr) if s is not None]
        self.chunks: dict[int, list[bytes]] = {}
        self.finished: list[asyncio.Future[None]] = []
        for stream in self.streams:
            fd = stream.fileno()
            os.set_blocking(fd, False)
            self.chunks[fd] = []
            done: asyncio.Future[None] = self.loop.create_future()
            self.finished.append(done)
            self.loop.add_reader(fd, self._readable, fd, done)

    def _readable(self, fd: int, done: asyncio.Future[None]) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            if sum(len(c) for c in self.chunks[fd]) < self.limit:
                self.chunks[fd].append(data)
            return
        self.loop.remove_reader(fd)
        if not done.done():
            done.set_result(None)

    async def close(self, popen: subprocess.Popen[bytes]) -> tuple[str, str]:
        """Wait briefly for the pipes to end, close them; return (stdout, stderr)."""
        # a grandchild may still hold the pipe; never wait on it for long
        if self.finished:
            await asyncio.wait(self.finished, timeout=1.0)
        out = b"".join(self.chunks.get(popen.stdout.fileno(), [])) if popen.stdout else b""
        err = b"".join(self.chunks.get(popen.stderr.fileno(), [])) if popen.stderr else b""
        for stream in self.streams:
            with contextlib.suppress(Exception):
                self.loop.remove_reader(stream.fileno())
            stream.close()
        return out.decode(errors="replace"), err.decode(errors="replace")


async def run_command(
    watcher: ChildWatch,
    argv: list[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdout_path: str | None = None,
    max_output: int = 4 << 20,
    on_spawn: Callable[[int], object] | None = None,
    on_kill: Callable[[], object] | None = None,
) -> CommandResult:
    """Run a short command to completion under the watcher, bounded by ``timeout``.

    Output goes to ``stdout_path`` (appended, stderr merged) or is captured (capped). On
    timeout, and when the caller is cancelled (a stop during a build), the command's whole
    tree is killed: its process group, every descendant (a ``setsid`` child included), and
    whatever ``on_kill`` knows of (the launcher's cgroup leaf). ``on_spawn`` gets the PID
    right after the start (to put it in that leaf and record its session).
    """
    try:
        popen = _popen(argv, env, cwd, stdout_path)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else str(exc)
        return CommandResult(127, "", f"{argv[0]}: {why}")
    if on_spawn is not None:
        on_spawn(popen.pid)
    done: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_exit(code: int) -> None:
        if not done.done():
            done.set_result(code)

    def kill() -> None:
        if not done.done():  # not reaped yet: its PID is still its own
            kill_tree(popen.pid)
        if on_kill is not None:
            on_kill()

    watcher.watch(popen.pid, on_exit, popen)
    capture = _Capture(popen, max_output)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            code = await asyncio.shield(done)
    except TimeoutError:
        timed_out = True
        kill()
        code = await done
    except asyncio.CancelledError:
        kill()
        with contextlib.suppress(Exception):
            await capture.close(popen)
        raise
    out, err = await capture.close(popen)
    return CommandResult(code, out, err, timed_out)


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every descendant (and their groups)."""
    from srt_services.launch.process import descendants

    kids = descendants(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    me = os.getpgrp()
    for kid in kids:
        with contextlib.suppress(OSError):
            group = os.getpgid(kid)
            if group not in (me, pid):
                os.killpg(group, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.kill(kid, signal.SIGKILL)
