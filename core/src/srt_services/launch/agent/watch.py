"""What an agent watches for the orchestrator's readiness probes: files written on its node
and ports its instances listen on.

The orchestrator's log and file probes wait on inotify, which sees only what this kernel
writes: a log that a node writes onto a network file system changes nothing the batch
host's inotify could see, and the probe falls back to a slow poll. The agent sees those
writes (they are its node's), so it reports them, coalesced (one report per file per
``COALESCE`` seconds however many lines were written), and the probe wakes at once.

A tcp or http probe on the batch host can tell a port answers, but not whether a process
of the instance answers (a stranger may hold the port): the agent finds the listener
among the instance's processes on its node and reports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

#: At most one report per file per this many seconds.
COALESCE = 0.02
#: Polling of a port an instance should listen on: first step, longest step (seconds).
PORT_POLL_FIRST = 0.01
PORT_POLL_MAX = 0.5


class FileWatch:
    """One inotify descriptor for every file the agent follows, each until a deadline."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self._report = report
        self._loop = asyncio.get_running_loop()
        #: path -> when following it ends (monotonic; inf: while the instance runs)
        self._until: dict[str, float] = {}
        self._pending: set[str] = set()
        self._dirs: dict[str, int] = {}
        self._wd_dir: dict[int, str] = {}
        self._inotify: Any = None
        #: whether the inotify descriptor was tried (made on the first file to follow)
        self._opened = False

    def _open(self) -> None:
        """The inotify descriptor, made when the first file is to be followed: an agent
        whose instances have no log or file probe never pays for it. inotify_simple finds
        libc with ``ctypes.util.find_library``, which runs ``ldconfig -p`` (a process and
        a parse of its output, on every node); the running interpreter's own symbols hold
        libc's, so it is handed those instead when the module still looks them up lazily."""
        self._opened = True
        try:
            from inotify_simple import flags

            from srt_services.inotify import open_inotify

            self._inotify = open_inotify()
            self._mask = flags.CREATE | flags.MODIFY | flags.MOVED_TO | flags.CLOSE_WRITE
            self._loop.add_reader(self._inotify.fileno(), self._readable)
        except (ImportError, OSError, AttributeError):
            self._inotify = None  # the orchestrator's probes poll, as without an agent

    def follow(self, path: str, seconds: float | None) -> None:
        if not self._opened:
            self._open()
        if self._inotify is None:
            return
        directory = os.path.dirname(path)
        if directory not in self._dirs:
            try:
                wd = self._inotify.add_watch(directory, self._mask)
            except OSError:
                return  # no such directory (yet): the probe's own poll covers it
            self._dirs[directory] = wd
            self._wd_dir[wd] = directory
        end = float("inf") if seconds is None else time.monotonic() + seconds
        self._until[path] = max(end, self._until.get(path, 0.0))

    def unfollow(self, path: str) -> None:
        self._until.pop(path, None)

    def _readable(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            return
        now = time.monotonic()
        for ev in events:
            directory = self._wd_dir.get(ev.wd)
            if directory is None or not ev.name:
                continue
            path = os.path.join(directory, ev.name)
            end = self._until.get(path)
            if end is None:
                continue
            if now > end:
                del self._until[path]
                continue
            if path not in self._pending:
                self._pending.add(path)
                self._loop.call_later(COALESCE, self._flush, path)

    def _flush(self, path: str) -> None:
        self._pending.discard(path)
        self._report(path)

    def close(self) -> None:
        if self._inotify is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._inotify.fileno())
            self._inotify.close()
            self._inotify = None


async def watch_ports(
    ports: list[int],
    owned: Callable[[int], bool | None],
    running: Callable[[], bool],
    report: Callable[[int, bool | None], None],
    budget: float,
) -> None:
    """Report each of ``ports`` once something listens on it: whether the instance's own
    processes do (``owned``). A port held by a stranger is reported as such and watched
    on, in case the instance takes it over. Ends when every port was reported as the
    instance's, when the instance is gone, or after ``budget`` seconds."""
    from srt_services.launch.sockdiag import listening_inodes

    pending = dict.fromkeys(ports, "unseen")
    step = PORT_POLL_FIRST
    end = time.monotonic() + budget
    while pending and running() and time.monotonic() < end:
        for port in list(pending):
            if not listening_inodes(port):
                continue
            answer = owned(port)
            if answer is False:
                if pending[port] != "stranger":
                    pending[port] = "stranger"
                    report(port, False)
                continue
            del pending[port]
            report(port, answer)
        await asyncio.sleep(step)
        step = min(step * 2, PORT_POLL_MAX)
