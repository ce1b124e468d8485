"""Finding and killing everything an op spawned, without ever hitting a stranger.

A killed op may leave helpers behind: children in its process group, grandchildren that
called ``setsid`` and so escaped the group, or anything that still holds our stdout pipe (the
bpo-37424 class of hang). We find them three ways (process group, descendants, holders of the
pipe inode) and signal individual PIDs only through psutil, which re-checks the process
creation time so a recycled PID is never signalled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import stat

import psutil

log = logging.getLogger(__name__)


def pipe_inode(fd: int) -> int | None:
    try:
        info = os.fstat(fd)
    except OSError:
        return None
    return info.st_ino if stat.S_ISFIFO(info.st_mode) else None


def pipe_holders(inodes: set[int]) -> list[psutil.Process]:
    """Processes (other than us) with an fd on one of these pipes; Linux /proc only."""
    if not inodes:
        return []
    targets = {f"pipe:[{ino}]" for ino in inodes}
    me = os.getpid()
    found: list[psutil.Process] = []
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
                with contextlib.suppress(psutil.Error):
                    found.append(psutil.Process(int(entry)))
                break
    return found


def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []


def kill_process_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_processes(processes: list[psutil.Process], sig: int = signal.SIGKILL) -> None:
    """Signal each process if it is still the same process (psutil checks creation time)."""
    me = os.getpid()
    for proc in processes:
        if proc.pid == me:
            continue
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            continue
        except psutil.Error as exc:  # AccessDenied, ZombieProcess
            log.debug("could not signal pid %s: %s", proc.pid, exc)


def kill_op_tree(leader: int, pipe_inodes: set[int]) -> None:
    """SIGKILL an op's process group, its descendants and whoever holds its output pipes.

    Descendants are collected before the leader dies, because afterwards they are
    re-parented and no longer findable through it.
    """
    doomed = descendants(leader)
    kill_process_group(leader)
    doomed.extend(pipe_holders(pipe_inodes))
    kill_processes(doomed)
