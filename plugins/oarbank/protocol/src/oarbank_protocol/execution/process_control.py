"""Finding and killing everything an op spawned, without ever hitting a stranger.

A killed op may leave helpers behind: children in its process group, grandchildren that
called ``setsid`` and so escaped the group, or anything that still holds our stdout pipe (the
bpo-37424 class of hang). We find them three ways (process group, descendants, holders of the
pipe inode), note each one's kernel start time when we find it, and signal a PID only while
the PID-reuse guard (:func:`~oarbank_protocol.execution.process_identity.same_process`) says
it is still that process, so a recycled PID is never signalled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat

import psutil

from oarbank_protocol.execution import process_identity

log = logging.getLogger(__name__)


def pipe_inode(fd: int) -> int | None:
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_ino if stat.S_ISFIFO(info.st_mode) else None


Found = tuple[int, int]
"""A process we may kill: (pid, kernel start ticks when we found it)."""


def _found(pid: int) -> Found | None:
    ticks = process_identity.start_ticks(pid)
    return (pid, ticks) if ticks is not None else None


def pipe_holders(inodes: set[int]) -> list[Found]:
    """Processes (other than us) with an fd on one of these pipes; Linux /proc only."""
    if not inodes:
        return []
    targets = {f"pipe:[{ino}]" for ino in inodes}
    me = os.getpid()
    found: list[Found] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        fd_dir = f"/proc/{entry}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if link in targets:
                item = _found(int(entry))
                if item is not None:
                    found.append(item)
                break
    return found


def descendants(pid: int) -> list[Found]:
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    return [item for child in children if (item := _found(child.pid)) is not None]


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_processes(found: list[Found], sig: int = signal.SIGKILL) -> None:
    """Signal each process if it is still the process we found (the PID-reuse guard)."""
    me = os.getpid()
    for pid, ticks in found:
        if pid == me or not process_identity.same_process(pid, ticks):
            continue
        if not process_identity.signal_pid(pid, sig):
            log.debug("could not signal pid %s", pid)


def kill_op_tree(leader: int, pipe_inodes: set[int]) -> None:
    """SIGKILL an op's process group, its descendants and whoever holds its output pipes.

    Descendants are collected before the leader dies, because afterwards they are
    re-parented and no longer findable through it.
    """
    doomed = descendants(leader)
    kill_process_group(leader)
    doomed.extend(pipe_holders(pipe_inodes))
    kill_processes(doomed)
