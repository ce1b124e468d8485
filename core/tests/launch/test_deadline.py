"""``deadline.at``: a timerfd wake-up of the event loop that fires, cancels cleanly and
leaves no descriptor behind (the teardown arms one per wait)."""

from __future__ import annotations

import asyncio

from srt_services.launch import deadline
from srt_services.testing.fds import open_fds, opened_since


def test_it_fires_at_the_deadline_not_before() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        when = loop.time() + 0.05
        await deadline.at(when)
        return when, loop.time()

    when, woke = asyncio.run(main())
    assert woke >= when


def test_a_deadline_passed_is_already_resolved() -> None:
    async def main() -> bool:
        loop = asyncio.get_running_loop()
        return deadline.at(loop.time() - 1).done()

    assert asyncio.run(main())


def test_it_uses_a_timerfd_on_linux() -> None:
    """The point of the module: where a timerfd exists, the wait is on one (an fd is open
    while it is armed), not on the loop's rounded timer."""

    async def main() -> tuple[list[str], list[str]]:
        loop = asyncio.get_running_loop()
        before = open_fds()
        fired = deadline.at(loop.time() + 60)
        armed = opened_since(before)
        fired.cancel()
        await asyncio.sleep(0)
        return armed, opened_since(before)

    armed, after = asyncio.run(main())
    assert armed == ["anon_inode:[timerfd]"]
    assert after == []


def test_cancelled_ones_never_fire_and_nothing_leaks() -> None:
    async def main() -> tuple[list[str], list[asyncio.Future[None]]]:
        loop = asyncio.get_running_loop()
        before = open_fds()
        cancelled = [deadline.at(loop.time() + 0.02) for _ in range(50)]
        for fut in cancelled:
            fut.cancel()
        fired = [deadline.at(loop.time() + 0.01 * (n % 3)) for n in range(50)]
        await asyncio.gather(*fired)
        await deadline.at(loop.time() + 0.05)  # past every cancelled deadline
        await asyncio.sleep(0)  # the done callbacks that release the descriptors
        return opened_since(before), cancelled

    leaked, cancelled = asyncio.run(main())
    assert leaked == []
    assert all(f.cancelled() for f in cancelled)


def test_a_deadline_cancelled_midway_releases_its_timer() -> None:
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        before = open_fds()
        fired = deadline.at(loop.time() + 60)
        await asyncio.sleep(0.01)
        fired.cancel()
        await asyncio.sleep(0)
        return opened_since(before)

    assert asyncio.run(main()) == []
