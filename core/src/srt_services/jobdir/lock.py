"""One orchestrator per job directory: an exclusive lock held for the job's whole life.

``srt run`` takes a write lock on ``orchestrator.lock`` before it reads or starts anything
and keeps the descriptor open until it exits; the kernel drops the lock when the process
ends however it ends (``kill -9`` included), so a stale lock cannot exist. The lock is an
open-file-description lock (``F_OFD_SETLK``): like ``flock`` it belongs to the descriptor,
not the process, and other processes can *test* it (``F_OFD_GETLK``) without taking it,
so ``srt status`` never gets in the way of a starting ``srt run``. On NFS it is a POSIX
lock, which the server arbitrates, so it holds across hosts too.

The file's text names the holder (PID, host, start), for the message that refuses a
second ``srt run``. It is created without following a link planted where it goes
(``O_NOFOLLOW``) and written only when it is a regular file with no other name (a hard
link to another file would be overwritten through it): anything else there is refused,
named. Readers open it like every job file (:mod:`srt_services.safefile`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
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
    from srt_services.safefile import UnsafeFile, open_beneath

    try:
        fd = open_beneath(*os.path.split(path))
    except (OSError, UnsafeFile):
        return "another srt run"
    try:
        text = os.pread(fd, 500, 0).decode("utf-8", errors="replace").strip()
    except OSError:
        text = ""
    finally:
        os.close(fd)
    return text or "another srt run"


def _open_lock(path: str) -> int:
    """The lock file, created if need be, never through a link; :class:`JobDirError` when
    what is there is not a plain file of its own."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise JobDirError(
                f"{path} is a symbolic link: srt does not lock (or write) through it;"
                " remove it, or use another --job-dir"
            ) from None
        raise
    st = os.fstat(fd)
    why = None
    if not stat.S_ISREG(st.st_mode):
        why = "is not a regular file"
    elif st.st_nlink != 1:
        why = f"has {st.st_nlink} names (a hard link to another file)"
    if why is not None:
        os.close(fd)
        raise JobDirError(
            f"{path} {why}: srt does not lock (or write) it; remove it, or use another --job-dir"
        )
    return fd


class JobLock:
    """The job directory's lock; :meth:`acquire` or fail, then keep it until :meth:`release`."""

    def __init__(self, job_dir: str) -> None:
        self.path = os.path.join(job_dir, LOCK)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock; :class:`JobLocked` names the holder when another run has it."""
        fd = _open_lock(self.path)
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
    from srt_services.safefile import UnsafeFile, open_beneath

    path = os.path.join(job_dir, LOCK)
    try:
        fd = open_beneath(job_dir, LOCK)
    except (OSError, UnsafeFile):
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
