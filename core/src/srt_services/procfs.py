"""What ``/proc/<pid>/stat`` says about a process: whether it lives, and since when.

A PID alone names a process only until it is reused; a PID together with its start time
(in clock ticks since boot) names it for good. Every layer that decides about a process it
did not just start (the launchers, ``srt status``/``srt stop``, the job directory's view of
its orchestrator) checks both, so these readers live below all of them.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from signal import pidfd_send_signal  # typeshed has no stub of _signal
else:  # not signal: its enums cost every node agent ~3 ms before its first launch
    from _signal import pidfd_send_signal


def _stat(pid: int) -> bytes | None:
    # os.open/os.read: the scans of a teardown read this for every process, and a buffered
    # file object costs as much again as the read (the line fits one read: comm is <= 64)
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


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


def stat_ids(pid: int) -> tuple[int, int, int, int] | None:
    """(ppid, pgid, sid, start ticks) of ``pid``, or ``None`` when it is gone or a zombie."""
    data = _stat(pid)
    if data is None:
        return None
    rest = data[data.rfind(b")") + 2 :].split()
    try:
        if rest[0] == b"Z":
            return None
        return int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19])
    except (IndexError, ValueError):
        return None


def all_pids() -> list[int]:
    """Every PID this process can see."""
    try:
        return [int(e) for e in os.listdir("/proc") if e.isdigit()]
    except OSError:  # pragma: no cover - no /proc
        return []


def _read_link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def pid_namespace() -> str | None:
    """This process's PID namespace (``pid:[4026531836]``): PIDs mean nothing outside it."""
    return _read_link("/proc/self/ns/pid")


def boot_id() -> str | None:
    """This boot of the kernel: a PID recorded before a reboot names nothing after it."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def signal_same(pid: int, ticks: int | None, sig: int) -> bool:
    """Send ``sig`` to ``pid`` only if it is still the process that started at ``ticks``.

    Through a pidfd where the kernel has them: the start time is checked on the pidfd's
    process, so a PID reused between the check and the signal is never hit. ``ticks``
    ``None`` signals nothing (an identity that cannot be checked is not trusted).
    """
    if ticks is None:
        return False
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False
    except OSError:  # pragma: no cover - a kernel without pidfds: check, then signal
        if not same_process(pid, ticks):
            return False
        try:
            os.kill(pid, sig)
        except OSError:
            return False
        return True
    try:
        if start_ticks(pid) != ticks:
            return False
        pidfd_send_signal(fd, sig)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
