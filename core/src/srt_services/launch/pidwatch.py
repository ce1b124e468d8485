"""Waiting for processes that are not (only) our children to exit, without polling.

The teardown waits for escaped processes it signalled: after their grace, and after each
SIGKILL, so that a rescan does not find them again. Polling ``/proc/<pid>/stat`` costs a
read per process per step and answers up to a step late; a pidfd (Linux 5.3+) becomes
readable the moment its process exits (a zombie counts as exited), so the event loop wakes
exactly then, and a deadline ends on a timerfd (:mod:`~srt_services.launch.deadline`), not
late by the loop's rounding and the kernel's slack. Where a pidfd cannot be had (an old
kernel, the descriptor limit reached), that process is polled as before, with a short
doubling step.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterable, Set
from typing import Any

from srt_services import procfs
from srt_services.launch.deadline import at as wake_at

#: Longest polling step for a process without a pidfd.
POLL_MAX = 0.02


class ExitWatch:
    """pidfds of the processes handed to :meth:`add`, watched by the running event loop.

    One watch serves a whole teardown: a process is added once (its pidfd stays open
    until it exits or :meth:`close`), and every wait asks about a subset.
    """

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        #: pid -> its pidfd, while it runs
        self._fds: dict[int, int] = {}
        #: pids seen exiting
        self._gone: set[int] = set()
        #: pids without a pidfd: polled
        self._polled: set[int] = set()
        #: woken on every exit
        self._waiters: list[asyncio.Future[None]] = []

    def add(self, pids: Iterable[int], seen_alive: bool = False) -> None:
        """Start watching ``pids`` (those already watched or gone are skipped).

        ``seen_alive``: a scan has just found these running, so one the watch saw exit is a
        new process under a reused PID, and is watched again (else every wait would take it
        for gone while each rescan finds it, and the rescans would spin).
        """
        for pid in pids:
            if seen_alive and pid in self._gone:
                self._gone.discard(pid)
            if pid in self._fds or pid in self._gone or pid in self._polled:
                continue
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                self._gone.add(pid)
                continue
            except OSError:
                self._polled.add(pid)
                continue
            self._fds[pid] = fd
            self._loop.add_reader(fd, self._exited, pid)

    def _exited(self, pid: int) -> None:
        fd = self._fds.pop(pid, None)
        if fd is not None:
            self._loop.remove_reader(fd)
            os.close(fd)
        self._gone.add(pid)
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def alive(self, pids: Iterable[int]) -> list[int]:
        """Those of ``pids`` still running (as far as the watch knows; an unwatched pid is
        looked up)."""
        out = []
        for pid in pids:
            if pid in self._gone:
                continue
            if pid in self._fds or procfs.alive(pid):
                out.append(pid)
            elif pid in self._polled:
                self._polled.discard(pid)
                self._gone.add(pid)
        return out

    async def wait(
        self,
        pids: Iterable[int],
        deadline: float,
        futures: Set[asyncio.Future[int]] = frozenset(),
        interrupt: asyncio.Event | None = None,
    ) -> list[int]:
        """Wait until every one of ``pids`` has exited and every future is done, or until
        ``deadline`` (loop time) or ``interrupt``; return the pids still running."""
        pids = list(pids)
        self.add(pids)
        left = self.alive(pids)
        pending = {f for f in futures if not f.done()}
        if not left and not pending:
            return []
        stop = asyncio.ensure_future(interrupt.wait()) if interrupt is not None else None
        timer = wake_at(deadline)
        step = 0.001
        try:
            while (left or pending) and not timer.done():
                if stop is not None and stop.done():
                    break
                woken: asyncio.Future[None] = self._loop.create_future()
                self._waiters.append(woken)
                waits: set[asyncio.Future[Any]] = {woken, timer, *pending}
                if stop is not None:
                    waits.add(stop)
                timeout = None
                if any(p in self._polled for p in left):
                    timeout, step = step, min(step * 2, POLL_MAX)
                await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
                if not woken.done():
                    self._waiters.remove(woken)
                    woken.cancel()
                left = self.alive(left)
                pending = {f for f in pending if not f.done()}
        finally:
            for task in (stop, timer):
                if task is not None and not task.done():
                    task.cancel()
        return left

    def close(self) -> None:
        """Stop watching; close every pidfd."""
        for fd in self._fds.values():
            with contextlib.suppress(Exception):
                self._loop.remove_reader(fd)
            os.close(fd)
        self._fds.clear()
        for waiter in self._waiters:
            waiter.cancel()
        self._waiters.clear()
