"""Running probes: the backoff schedule, the shared inotify watcher, the probe target.

Polling probes (tcp, http) attempt at once, then back off 5 ms, 10 ms, 20 ms... to 80 ms
for the first three seconds (quick services are seen within milliseconds), then more slowly
up to the recipe's ``interval_seconds``. Waiting for a port is done by one shared poller
(:mod:`srt_services.supervise.portpoll`): one timer, one non-blocking connect per due
attempt, and a probe is woken only when its port opened.

File-based probes (log, file) wait on one shared inotify descriptor: a log line is noticed
within a millisecond of being written, and an idle probe costs nothing. A slow fallback
poll covers filesystems where inotify sees nothing (logs written on another node).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from srt_services.contracts.plan import PlannedProbe
from srt_services.supervise.backoff import FAST_CAP, FAST_START, FAST_WINDOW, backoff_delay
from srt_services.supervise.portpoll import PortPoller

__all__ = ["FAST_CAP", "FAST_START", "FAST_WINDOW", "InotifyHub", "Target", "backoff_delay"]


#: How long a directory stays watched after its last waiter left (see ``InotifyHub.wait``).
WATCH_LINGER = 2.0


class InotifyHub:
    """One inotify descriptor for every file-based probe of the job."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        from inotify_simple import flags

        from srt_services.inotify import open_inotify

        self.loop = loop
        self._inotify = open_inotify()
        self._mask = (
            flags.CREATE
            | flags.MODIFY
            | flags.MOVED_TO
            | flags.CLOSE_WRITE
            | flags.ATTRIB
            | flags.DELETE
        )
        self._dirs: dict[str, int] = {}
        self._wd_dir: dict[int, str] = {}
        self._waiters: dict[str, set[asyncio.Future[None]]] = defaultdict(set)
        self._dir_users: dict[str, int] = defaultdict(int)
        loop.add_reader(self._inotify.fileno(), self._on_readable)
        self._closed = False

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self._inotify.fileno())
        self._inotify.close()

    def _watch_dir(self, directory: str) -> bool:
        if directory in self._dirs:
            return True
        try:
            wd = self._inotify.add_watch(directory, self._mask)
        except OSError:
            return False
        self._dirs[directory] = wd
        self._wd_dir[wd] = directory
        return True

    def _unwatch_dir(self, directory: str) -> None:
        wd = self._dirs.pop(directory, None)
        if wd is None:
            return
        self._wd_dir.pop(wd, None)
        with contextlib.suppress(OSError):
            self._inotify.rm_watch(wd)

    def _on_readable(self) -> None:
        try:
            events = self._inotify.read(timeout=0)
        except OSError:
            return
        for ev in events:
            directory = self._wd_dir.get(ev.wd)
            if directory is None:
                continue
            path = os.path.join(directory, ev.name) if ev.name else directory
            for fut in self._waiters.pop(path, ()):
                if not fut.done():
                    fut.set_result(None)

    def poke(self, path: str) -> None:
        """``path`` changed where this machine's inotify cannot see it (a node agent saw a
        log grow on its node): wake whoever waits for it, as a local event would."""
        for fut in self._waiters.pop(path, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait(self, path: str, timeout: float) -> None:
        """Return when ``path`` may have changed, or after ``timeout`` seconds.

        Callers loop "read the file, then wait". A write that lands while no watch covers
        the directory produces no event at all, so two rules keep that gap closed: a wait
        that had to add the watch returns at once (the caller reads again, now covered),
        and a watch outlives its last waiter by ``WATCH_LINGER`` seconds, so the next turn
        of the loop finds it still in place.
        """
        directory = os.path.dirname(path) or "."
        known = directory in self._dirs
        watched = self._watch_dir(directory)
        if not watched:
            # the directory itself does not exist yet: watch the nearest existing parent
            parent = directory
            while parent and parent != "/" and not os.path.isdir(parent):
                parent = os.path.dirname(parent)
            known = parent in self._dirs
            if parent and self._watch_dir(parent):
                path, directory = (
                    os.path.join(parent, os.path.relpath(path, parent).split(os.sep)[0]),
                    parent,
                )
                watched = True
        if watched and not known:
            self._release_later(directory)
            return
        fut: asyncio.Future[None] = self.loop.create_future()
        self._waiters[path].add(fut)
        self._dir_users[directory] += 1
        try:
            async with asyncio.timeout(timeout):
                await fut
        except TimeoutError:
            pass
        finally:
            self._waiters.get(path, set()).discard(fut)
            self._dir_users[directory] -= 1
            if self._dir_users[directory] <= 0:
                del self._dir_users[directory]
                self._release_later(directory)

    def _release_later(self, directory: str) -> None:
        def release() -> None:
            if not self._closed and self._dir_users.get(directory, 0) <= 0:
                self._unwatch_dir(directory)

        self.loop.call_later(WATCH_LINGER, release)


def file_start(path: str) -> tuple[int | None, int]:
    """``(inode, size)`` of the file at ``path`` now; ``(None, 0)`` if there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None, 0
    return st.st_ino, st.st_size


def probe_starts(probes: Iterable[PlannedProbe | None]) -> dict[str, tuple[int | None, int]]:
    """Where each file that one of ``probes`` follows stands now (see ``Target.starts``):
    taken right before an attempt is launched, so its first line counts and no earlier one
    does."""
    out: dict[str, tuple[int | None, int]] = {}
    for probe in probes:
        if probe is not None:
            path = probe.config.get("path")
            if isinstance(path, str) and path:
                out[path] = file_start(path)
    return out


@dataclass(slots=True)
class Target:
    """The :class:`~srt_services.contracts.probe.ProbeTarget` the runtime hands a probe."""

    config: dict[str, Any]
    log_path: str
    log_offset: int
    job_dir: str
    started_wall: float
    interval: float
    hub: InotifyHub | None
    owner_check: Callable[[int], bool | None]
    poller: PortPoller | None = None
    #: path -> (inode, size) of the files the attempt's probes follow, taken at its launch
    starts: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    last_error: str = ""
    attempts: int = 0
    started_mono: float = field(default_factory=time.monotonic)

    def owns_listener(self, port: int) -> bool | None:
        return self.owner_check(port)

    def start_of(self, path: str) -> tuple[int | None, int]:
        found = self.starts.get(path)
        if found is None:  # not recorded at launch (a probe run outside a job): from now
            found = self.starts[path] = file_start(path)
        return found

    async def next_attempt(self) -> None:
        delay = backoff_delay(self.attempts, time.monotonic() - self.started_mono, self.interval)
        self.attempts += 1
        await asyncio.sleep(delay)

    async def wait_port(self, host: str, port: int, attempt_timeout: float = 1.0) -> None:
        """Return once ``host:port`` accepts a connection (on the shared poller)."""
        if self.poller is None:
            from srt_services.probes.tcp import connect_once

            while (failure := await connect_once(host, port, attempt_timeout)) is not None:
                self.last_error = failure
                await self.next_attempt()
            return
        waiter = self.poller.wait_open(
            host, port, self.interval, self.started_mono, attempt_timeout
        )
        try:
            await waiter.future
        finally:
            if not waiter.future.done():
                self.poller.cancel(waiter)
            self.last_error = waiter.last_error or self.last_error

    async def wait_file_event(self, path: str, timeout: float) -> None:
        self.attempts += 1
        if self.hub is None:
            await asyncio.sleep(min(timeout, self.interval))
            return
        await self.hub.wait(path, min(timeout, max(self.interval, 0.05)))
