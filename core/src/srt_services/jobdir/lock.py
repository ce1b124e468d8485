"""One orchestrator per job directory: an exclusive lock held for the job's whole life.

``srt run`` takes a write lock on ``orchestrator.lock`` before it reads or starts anything
and keeps the descriptor open until it exits; the kernel drops the lock when the process
ends however it ends (``kill -9`` included), so a stale lock cannot exist. The lock is an
open-file-description lock (``F_OFD_SETLK``): like ``flock`` it belongs to the descriptor,
not the process, and other processes can *test* it (``F_OFD_GETLK``) without taking it,
so ``srt status`` never gets in the way of a starting ``srt run``. On NFS it is a POSIX
lock, which the server arbitrates, so it holds across hosts too.

The file's text names the holder (PID, host, start), for the message that refuses a
second ``srt run``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import struct
import time

from srt_services.jobdir.layout import JobDirError

LOCK = "orchestrator.lock"

# struct flock: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = "hhqqi"
_FLOCK_SIZE = 32


def _flock(kind: int) -> bytes:
    data = struct.pack(_FLOCK, kind, os.SEEK_SET, 0, 0, 0)
    return data + b"\0" * (_FLOCK_SIZE - len(data))


class JobLocked(JobDirError):
    """Another ``srt run`` holds the job directory."""


def _describe(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(500).strip()
    except OSError:
        text = ""
    return text or "another srt run"


class JobLock:
    """The job directory's lock; :meth:`acquire` or fail, then keep it until :meth:`release`."""

    def __init__(self, job_dir: str) -> None:
        self.path = os.path.join(job_dir, LOCK)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; :class:`JobLocked` names the holder when another run has it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _flock(fcntl.F_WRLCK))
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise JobLocked(
                    f"{os.path.dirname(self.path)} is in use by another srt run"
                    f" ({_describe(self.path)}); use `srt stop` first, or another --job-dir"
                ) from None
            raise
        self._fd = fd
        text = (
            f"pid {os.getpid()} on {socket.gethostname()},"
            f" since {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        )
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
        except OSError:
            pass  # the lock is what counts; the text only helps the message

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def held(job_dir: str) -> str | None:
    """Who holds ``job_dir``'s lock (its text), or ``None`` when no ``srt run`` does."""
    path = os.path.join(job_dir, LOCK)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        got = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _flock(fcntl.F_WRLCK))
    except OSError:
        return None
    finally:
        os.close(fd)
    if struct.unpack_from(_FLOCK, got)[0] == fcntl.F_UNLCK:
        return None
    return _describe(path)
