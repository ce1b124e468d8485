"""A wake-up at an exact moment of the event loop's clock, through a timerfd.

asyncio's own timers sleep in ``epoll_wait``, whose timeout the loop rounds up to a whole
millisecond and the kernel lets slip by 0.1 % of its length (the select/poll "slack"):
a 1 s grace ends 1-2.5 ms late. A teardown adds that to every grace it waits out. A
timerfd armed for an absolute time of ``CLOCK_MONOTONIC`` (the clock of ``loop.time()``)
fires within the process's timer slack (50 µs by default) instead, and is read through
the loop like any descriptor. Where there is no timerfd, the loop's own timer is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import time
from typing import Any

CLOCK_MONOTONIC = 1
TFD_TIMER_ABSTIME = 1
TFD_NONBLOCK = os.O_NONBLOCK
TFD_CLOEXEC = os.O_CLOEXEC


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


def _libc() -> Any:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.timerfd_create  # noqa: B018 - the lookup is the check
        libc.timerfd_settime  # noqa: B018
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return None
    return libc


_LIBC = _libc()


def _loop_clock_is_monotonic(loop: asyncio.AbstractEventLoop) -> bool:
    return abs(loop.time() - time.monotonic()) < 0.001


def at(deadline: float) -> asyncio.Future[None]:
    """A future of the running loop that resolves at ``deadline`` (``loop.time()``), to
    within the timer slack; already resolved if it has passed. Cancel it when no longer
    wanted: that releases its timer."""
    loop = asyncio.get_running_loop()
    fired: asyncio.Future[None] = loop.create_future()
    now = loop.time()
    if deadline <= now:
        fired.set_result(None)
        return fired
    fd = _timerfd(deadline) if _LIBC is not None and _loop_clock_is_monotonic(loop) else None
    if fd is None:
        handle = loop.call_at(deadline, _resolve, fired)
        fired.add_done_callback(lambda _: handle.cancel())
        return fired
    # resolved straight from the reader callback: one loop turn less than a sleeping task
    loop.add_reader(fd, _resolve, fired)

    def release(_: object) -> None:
        with contextlib.suppress(Exception):
            loop.remove_reader(fd)
        os.close(fd)

    fired.add_done_callback(release)
    return fired


def _resolve(fired: asyncio.Future[None]) -> None:
    if not fired.done():
        fired.set_result(None)


def _timerfd(deadline: float) -> int | None:
    """A timerfd that becomes readable at ``deadline`` of CLOCK_MONOTONIC, or ``None``."""
    fd = int(_LIBC.timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC))
    if fd < 0:
        return None
    sec = int(deadline)
    spec = _Itimerspec(_Timespec(0, 0), _Timespec(sec, int((deadline - sec) * 1e9)))
    if _LIBC.timerfd_settime(fd, TFD_TIMER_ABSTIME, ctypes.byref(spec), None) != 0:
        os.close(fd)
        return None
    return fd
