"""A process's identity: its PID together with the kernel's record of when it started.

A PID names a process only until the kernel hands it to someone else. The protocol's agent
signals what an op left behind, refuses to adopt a recorded service whose PID now belongs
to another process, and the conformance runner kills what a broken module left running;
each of those acts on a PID it found earlier, so each first checks that the PID still
carries the start time noted when it was found. The start time is field 22 of
``/proc/<pid>/stat`` (clock ticks since boot): exact, unlike a float creation time, and
stable for the life of the process. State files record it, so its unit must not change.

Linux only (the protocol's agent runs there); on a kernel without ``/proc`` nothing has an
identity, so nothing is ever signalled or adopted by PID.
"""

from __future__ import annotations

import os
import signal


def _stat_fields(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name, or ``None`` if gone.

    The command name (field 2) may hold blanks and parentheses, so the fields are counted
    from the last ``)``: the first one returned is the state (field 3).
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data[data.rfind(b")") + 2 :].split()


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot; ``None`` when it does not exist."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and has not exited (a zombie has)."""
    fields = _stat_fields(pid)
    if not fields:
        return False
    return fields[0] != b"Z"


def pid_ticks(pid: int | None) -> int | None:
    """The start time to record next to ``pid`` (``None`` for no PID or a gone process)."""
    return start_ticks(pid) if pid else None


def same_process(pid: int, ticks: object) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``ticks``.

    A record without a usable start time (``None``, a string, a bool from a hand-edited
    state file) matches nothing: an identity that cannot be checked is not trusted.
    """
    if not isinstance(ticks, int) or isinstance(ticks, bool):
        return False
    return alive(pid) and start_ticks(pid) == ticks


def signal_pid(pid: int, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False when it is gone or not ours to signal."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def signal_same(pid: int, ticks: int, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to ``pid`` only while it is still the process that started at ``ticks``."""
    return same_process(pid, ticks) and signal_pid(pid, sig)
