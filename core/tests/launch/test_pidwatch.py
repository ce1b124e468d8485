"""``ExitWatch``: a teardown's waits for escaped processes wake when they exit (pidfd), a
process without a pidfd is polled, and a deadline returns the survivors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest
from srt_services.launch import pidwatch
from srt_services.testing.fds import open_fds, opened_since

#: Far enough that a wait ending before it can only have been woken by the exit.
FAR = 60.0


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _sleeper(started: list[subprocess.Popen[bytes]]) -> int:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    started.append(proc)
    return proc.pid


def test_an_exit_wakes_the_wait(sleepers: list[subprocess.Popen[bytes]]) -> None:
    """The process is left a zombie (not reaped): it has exited, and the wait says so."""
    pids = [_sleeper(sleepers) for _ in range(3)]

    async def main() -> tuple[list[int], bool, list[str]]:
        loop = asyncio.get_running_loop()
        before = open_fds()
        watch = pidwatch.ExitWatch()
        watch.add(pids)
        loop.call_later(0.05, lambda: [os.kill(p, signal.SIGKILL) for p in pids])
        end = loop.time() + FAR
        left = await watch.wait(pids, end)
        woke_early = loop.time() < end
        watch.close()
        await asyncio.sleep(0)  # a cancelled deadline releases its timerfd on the next turn
        return left, woke_early, opened_since(before)

    left, woke_early, leaked = asyncio.run(main())
    assert left == []
    assert woke_early, "the wait ran to its deadline instead of waking on the exits"
    assert leaked == []


def test_a_process_without_a_pidfd_is_polled(
    sleepers: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(pidwatch.os, "pidfd_open", no_pidfd)
    pid = _sleeper(sleepers)

    async def main() -> tuple[list[int], bool, bool]:
        loop = asyncio.get_running_loop()
        watch = pidwatch.ExitWatch()
        watch.add([pid])
        polled = pid in watch._polled
        loop.call_later(0.05, os.kill, pid, signal.SIGKILL)
        end = loop.time() + FAR
        left = await watch.wait([pid], end)
        watch.close()
        return left, loop.time() < end, polled

    left, woke_early, polled = asyncio.run(main())
    assert polled
    assert left == []
    assert woke_early


def test_the_deadline_returns_the_survivors(sleepers: list[subprocess.Popen[bytes]]) -> None:
    alive, dying = _sleeper(sleepers), _sleeper(sleepers)

    async def main() -> tuple[list[int], float, float]:
        loop = asyncio.get_running_loop()
        watch = pidwatch.ExitWatch()
        loop.call_later(0.02, os.kill, dying, signal.SIGKILL)
        end = loop.time() + 0.3
        left = await watch.wait([alive, dying], end)
        now = loop.time()
        watch.close()
        return left, now, end

    left, now, end = asyncio.run(main())
    assert left == [alive]
    assert now >= end


def test_an_interrupt_ends_the_wait(sleepers: list[subprocess.Popen[bytes]]) -> None:
    pid = _sleeper(sleepers)

    async def main() -> tuple[list[int], bool]:
        loop = asyncio.get_running_loop()
        watch = pidwatch.ExitWatch()
        stop = asyncio.Event()
        loop.call_later(0.02, stop.set)
        end = loop.time() + FAR
        left = await watch.wait([pid], end, interrupt=stop)
        watch.close()
        return left, loop.time() < end

    left, early = asyncio.run(main())
    assert left == [pid]
    assert early


def test_futures_are_waited_for_too(sleepers: list[subprocess.Popen[bytes]]) -> None:
    pid = _sleeper(sleepers)
    os.kill(pid, signal.SIGKILL)

    async def main() -> tuple[list[int], bool]:
        loop = asyncio.get_running_loop()
        watch = pidwatch.ExitWatch()
        fut: asyncio.Future[int] = loop.create_future()
        loop.call_later(0.05, fut.set_result, 0)
        left = await watch.wait([pid], loop.time() + FAR, {fut})
        watch.close()
        return left, fut.done()

    left, done = asyncio.run(main())
    assert left == []
    assert done


def test_a_pid_seen_alive_again_is_watched_again(
    sleepers: list[subprocess.Popen[bytes]],
) -> None:
    """A PID the watch saw exit and a scan then finds running (reused) is not taken for gone."""
    pid = _sleeper(sleepers)

    async def main() -> tuple[list[int], list[int]]:
        watch = pidwatch.ExitWatch()
        watch._gone.add(pid)  # as if an earlier process with this PID had exited
        stale = watch.alive([pid])
        watch.add([pid], seen_alive=True)
        fresh = watch.alive([pid])
        watch.close()
        return stale, fresh

    stale, fresh = asyncio.run(main())
    assert stale == []
    assert fresh == [pid]
