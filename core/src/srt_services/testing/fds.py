"""What a test opened and left open, told apart from whatever else the process closed.

Counting ``/proc/self/fd`` before and after is wrong in both directions: the garbage
collector may close an earlier test's forgotten file in between (a count that drops hides a
leak), and a test runner's own threads open and close descriptors at any time (pytest-xdist
workers do). What was opened since is what is open now and was not open before *as the same
thing* (its number and what it points at), so a reused number is still seen.
"""

from __future__ import annotations

import os

FD_DIR = "/proc/self/fd"


def open_fds() -> dict[int, str]:
    """Each open descriptor and what it points at (``anon_inode:[timerfd]``, a path...)."""
    out: dict[int, str] = {}
    for name in os.listdir(FD_DIR):
        try:
            out[int(name)] = os.readlink(f"{FD_DIR}/{name}")
        except OSError:  # closed since the listing (the listing's own, for one)
            continue
    return out


def opened_since(before: dict[int, str]) -> list[str]:
    """What is open now that was not open in ``before`` (from :func:`open_fds`)."""
    now = open_fds()
    return sorted(target for fd, target in now.items() if before.get(fd) != target)
