"""What ``/proc/<pid>/stat`` says about a process: whether it lives, and since when.

A PID alone names a process only until it is reused; a PID together with its start time
(in clock ticks since boot) names it for good. Every layer that decides about a process it
did not just start (the launchers, ``srt status``/``srt stop``, the job directory's view of
its orchestrator) checks both, so these readers live below all of them.
"""

from __future__ import annotations


def _stat(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read()
    except OSError:
        return None


def start_ticks(pid: int) -> int | None:
    """Process start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    data = _stat(pid)
    if data is None:
        return None
    # the command name (field 2) may hold spaces and parentheses: fields restart after the last ")"
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        return int(rest[19])
    except (IndexError, ValueError):
        return None


def proc_state(pid: int) -> str | None:
    """One-letter state (R, S, D, T, Z...) or ``None`` when the process is gone."""
    data = _stat(pid)
    if data is None:
        return None
    at = data.rfind(b")") + 2
    return data[at : at + 1].decode()


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    state = proc_state(pid)
    return state is not None and state != "Z"


def same_process(pid: int, ticks: object) -> bool:
    """Whether ``pid`` is alive and is still the process that started at ``ticks``.

    The one PID-reuse guard: a recorded PID is signalled or adopted only when its kernel
    start time matches, so a recycled PID (another user's process) is never touched. A
    record without a start time (``None``, a wrong type) matches nothing.
    """
    if not isinstance(ticks, int) or isinstance(ticks, bool):
        return False
    return alive(pid) and start_ticks(pid) == ticks
