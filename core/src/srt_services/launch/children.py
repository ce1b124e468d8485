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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

ExitCallback = Callable[[int], None]


def exit_code(status: int) -> int:
    """``waitpid`` status to a shell-style code: exit N, or 128+N for death by signal N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


class ChildWatcher:
    """Reaps children on SIGCHLD and dispatches exit codes to registered callbacks."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._callbacks: dict[int, ExitCallback] = {}
        self._popens: dict[int, subprocess.Popen[bytes]] = {}
        self.orphans_reaped = 0
        self.last_exit_at: dict[int, float] = {}
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

    def adopt(self, pid: int, callback: ExitCallback) -> None:
        """Watch a re-parented orphan (it is our child now, so its exit reaches us)."""
        self.watch(pid, callback)

    @property
    def watched(self) -> int:
        return len(self._callbacks)

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
            callback = self._callbacks.pop(pid, None)
            self.last_exit_at[pid] = time.monotonic()
            if callback is not None:
                callback(code)
            else:
                self.orphans_reaped += 1


@dataclass(slots=True)
class CommandResult:
    code: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out


async def run_command(
    watcher: ChildWatcher,
    argv: list[str],
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    stdout_path: str | None = None,
    max_output: int = 4 << 20,
) -> CommandResult:
    """Run a short command to completion under the watcher, bounded by ``timeout``.

    Output goes to ``stdout_path`` (appended, stderr merged) or is captured (capped). On
    timeout the command's whole process group is killed.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    out_fd = None
    if stdout_path is not None:
        out_fd = os.open(stdout_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        popen = subprocess.Popen(
            argv,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out_fd if out_fd is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT if out_fd is not None else subprocess.PIPE,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        if out_fd is not None:
            os.close(out_fd)
        return CommandResult(127, "", f"{argv[0]}: {exc.strerror}")
    if out_fd is not None:
        os.close(out_fd)

    def on_exit(code: int) -> None:
        if not done.done():
            done.set_result(code)

    watcher.watch(popen.pid, on_exit, popen)
    chunks: dict[int, list[bytes]] = {}
    readers: list[asyncio.Future[None]] = []
    for stream in (popen.stdout, popen.stderr):
        if stream is None:
            continue
        fd = stream.fileno()
        os.set_blocking(fd, False)
        chunks[fd] = []
        finished: asyncio.Future[None] = loop.create_future()
        readers.append(finished)

        def readable(fd: int = fd, finished: asyncio.Future[None] = finished) -> None:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                if sum(len(c) for c in chunks[fd]) < max_output:
                    chunks[fd].append(data)
                return
            loop.remove_reader(fd)
            if not finished.done():
                finished.set_result(None)

        loop.add_reader(fd, readable)
    timed_out = False
    try:
        async with asyncio.timeout(timeout):
            code = await asyncio.shield(done)
    except TimeoutError:
        timed_out = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        code = await done
    # a grandchild may still hold the pipe; never wait on it for long
    if readers:
        await asyncio.wait(readers, timeout=1.0)
    out_chunks = chunks.get(popen.stdout.fileno(), []) if popen.stdout else []
    err_chunks = chunks.get(popen.stderr.fileno(), []) if popen.stderr else []
    for stream in (popen.stdout, popen.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                loop.remove_reader(stream.fileno())
            stream.close()
    out, err = b"".join(out_chunks), b"".join(err_chunks)
    return CommandResult(
        code, out.decode(errors="replace"), err.decode(errors="replace"), timed_out
    )
