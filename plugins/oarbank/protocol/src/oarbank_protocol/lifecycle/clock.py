"""Injectable monotonic time for every timer in the lifecycle manager (fault matrix F26).

Backoff, idle timeouts, reaper and probe periods all read :class:`Clock` and never the wall
clock, so a wall-clock jump can neither fire a restart early nor stall one; and tests drive
the same code with :class:`FakeClock` instead of sleeping. Protocol op timeouts are the one
exception: they bound real child processes and use the event loop's real time.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (CLOCK_MONOTONIC for the real one)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(seconds, 0.0))


class FakeClock:
    """A clock that only moves when a test calls :meth:`advance`.

    Sleepers wake in deadline order, and sleeps scheduled by woken tasks are honoured within
    the same ``advance`` call, so advancing 100 s runs a whole backoff sequence.
    """

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future

    def pending(self) -> int:
        return sum(1 for _, _, f in self._sleepers if not f.done())

    def next_deadline(self) -> float | None:
        self._drop_done()
        return self._sleepers[0][0] if self._sleepers else None

    def _drop_done(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    def _fire_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)

    async def advance(self, seconds: float, *, settle_rounds: int = 30) -> None:
        """Move time forward by ``seconds``, waking sleepers in order and letting them run."""
        target = self._now + seconds
        await settle(settle_rounds)
        while True:
            nxt = self.next_deadline()
            if nxt is None or nxt > target:
                break
            self._now = max(self._now, nxt)
            self._fire_due()
            await settle(settle_rounds)
        self._now = target
        await settle(settle_rounds)


async def settle(rounds: int = 30) -> None:
    """Yield to the event loop a few times so woken tasks reach their next await."""
    for _ in range(rounds):
        await asyncio.sleep(0)


async def wait_event(event: asyncio.Event, clock: Clock, timeout: float | None) -> bool:
    """Wait for ``event`` or ``timeout`` seconds of ``clock`` time; True if the event fired."""
    if event.is_set():
        return True
    if timeout is None:
        await event.wait()
        return True
    if timeout <= 0:
        return event.is_set()
    waiter = asyncio.ensure_future(event.wait())
    sleeper = asyncio.ensure_future(clock.sleep(timeout))
    try:
        await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        sleeper.cancel()
    return event.is_set()
