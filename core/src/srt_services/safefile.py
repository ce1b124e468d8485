"""Opening files that srt reads but did not write itself, without trusting them.

Job directories, job roots, the site config and plugin lock files are written by people
and by other programs, and ``srt status``, ``srt logs`` or ``srt stop`` may run as root on
another user's job. What such a file can be is therefore checked before a byte is read:

* it is opened as a path first (``O_PATH``: no open of a FIFO that waits for a writer, no
  device driver's open with its side effects), its type checked, and only a regular file
  is then opened for reading (through ``/proc/self/fd``, the same inode whatever the name
  now names);
* a file inside a directory (the job directory) is resolved beneath it (``openat2`` with
  ``RESOLVE_BENEATH``): a symbolic link may point elsewhere in the directory, never out of
  it, whatever the link or a ``..`` says; without ``openat2`` every symbolic link below the
  directory is refused;
* what root reads for another user (the owner of the job directory) is opened with that
  user's file-system identity and groups (``setfsuid``, ``setfsgid`` and ``setgroups`` of
  the calling thread only), so it is never more than that user could read;
* reading is bounded: a file larger than its limit is an error, not a ``MemoryError``.

Every refusal is :class:`UnsafeFile`, whose message names the file and what is wrong with
it; a file that does not exist is ``FileNotFoundError``, for callers to whom that is
normal.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from srt_services.errors import SrtError

#: ``struct open_how`` resolve flags (linux/openat2.h).
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08

_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4

#: syscall numbers where they differ per architecture (openat2 is 437 everywhere).
_SYSCALLS = {
    "x86_64": {"openat2": 437, "setgroups": 116},
    "aarch64": {"openat2": 437, "setgroups": 159},
}


class UnsafeFile(SrtError):
    """A file srt was about to read is not what it may read; the message says why."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Whose permissions a read is done with (see :func:`owner_of`)."""

    uid: int
    gid: int
    groups: tuple[int, ...]


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover - no libc (not Linux)
        return None


_LIBC = _libc()
_NUMBERS = _SYSCALLS.get(platform.machine(), {})
#: whether openat2 works here (learnt on first use: ENOSYS on kernels before 5.6)
_openat2_works: bool | None = None if "openat2" in _NUMBERS else False


class _OpenHow(ctypes.Structure):
    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


def _openat2(dirfd: int, relative: str, flags: int, resolve: int) -> int | None:
    """``openat2(2)``; ``None`` where the kernel (or this machine) has none."""
    global _openat2_works
    if _openat2_works is False or _LIBC is None:
        return None
    how = _OpenHow(flags, 0, resolve)
    fd = int(
        _LIBC.syscall(
            ctypes.c_long(_NUMBERS["openat2"]),
            ctypes.c_int(dirfd),
            ctypes.c_char_p(os.fsencode(relative)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
    )
    if fd >= 0:
        _openat2_works = True
        return fd
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and _openat2_works is None:
        # ENOSYS: an old kernel; EPERM: a seccomp filter (some containers) that refuses it
        _openat2_works = False
        return None
    raise OSError(err, os.strerror(err), relative)


def _walk_without_links(dirfd: int, relative: str) -> int:
    """``O_PATH`` descriptor of ``relative`` under ``dirfd``, refusing every symbolic link
    on the way (the fallback without ``openat2``)."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise OSError(errno.EXDEV, "leaves the directory", relative)
    current = os.dup(dirfd)
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if last else os.O_DIRECTORY)
            nxt = os.open(part, flags, dir_fd=current)
            os.close(current)
            current = nxt
            if not last and stat.S_ISLNK(os.fstat(current).st_mode):  # pragma: no cover
                raise OSError(errno.ELOOP, "a symbolic link", relative)
        return current
    except BaseException:
        os.close(current)
        raise


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _refusal(path: str, exc: OSError, root: str | None) -> UnsafeFile:
    if exc.errno == errno.EXDEV:
        where = f" out of {root}" if root else ""
        return UnsafeFile(f"{path} leads{where} (a symbolic link or '..'): not read")
    if exc.errno == errno.ELOOP:
        if root is not None and _openat2_works is False:
            return UnsafeFile(f"{path} goes through a symbolic link: not read")
        return UnsafeFile(f"{path} is a symbolic link loop (or a link srt does not follow)")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnsafeFile(f"{path} cannot be read: permission denied")
    return UnsafeFile(f"{path} cannot be read: {exc.strerror or exc}")


# ---------------------------------------------------------------------------- identity


def owner_of(st: os.stat_result) -> Identity | None:
    """The identity to read a file of ``st``'s owner with, when this process is root and
    the owner is someone else; ``None`` when reads need no change of identity."""
    if os.geteuid() != 0 or st.st_uid == 0:
        return None
    import pwd

    try:
        entry = pwd.getpwuid(st.st_uid)
    except KeyError:
        return Identity(st.st_uid, st.st_gid, (st.st_gid,))
    try:
        groups = tuple(os.getgrouplist(entry.pw_name, entry.pw_gid))
    except OSError:  # pragma: no cover
        groups = (entry.pw_gid,)
    return Identity(st.st_uid, entry.pw_gid, groups)


def _setgroups(groups: tuple[int, ...]) -> bool:
    """The calling thread's supplementary groups (the raw system call: glibc's wrapper
    would change every thread's)."""
    number = _NUMBERS.get("setgroups")
    if number is None or _LIBC is None:
        return False
    array = (ctypes.c_uint32 * max(1, len(groups)))(*groups)
    return int(_LIBC.syscall(ctypes.c_long(number), ctypes.c_size_t(len(groups)), array)) == 0


@contextlib.contextmanager
def acting_as(who: Identity | None) -> Iterator[bool]:
    """Permission checks of this thread done as ``who`` (nothing changes for ``None``).

    Yields whether the supplementary groups were changed too; where they could not be
    (an architecture without the numbers here), callers check the mode bits themselves.
    """
    if who is None or _LIBC is None:
        yield True
        return
    before_groups = tuple(os.getgroups())
    # a change of the file-system uid makes the process undumpable: put that back after
    dumpable = _LIBC.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    groups_set = _setgroups(who.groups)
    _LIBC.setfsgid(who.gid)
    _LIBC.setfsuid(who.uid)
    try:
        yield groups_set
    finally:
        _LIBC.setfsuid(0)
        _LIBC.setfsgid(0)
        if groups_set:
            _setgroups(before_groups)
        if dumpable == 1:
            _LIBC.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)


def _readable_by(st: os.stat_result, who: Identity) -> bool:
    """The permission bits' answer to "may ``who`` read this" (no ACLs)."""
    if st.st_uid == who.uid:
        return bool(st.st_mode & stat.S_IRUSR)
    if st.st_gid in who.groups:
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)


# ---------------------------------------------------------------------------- opening


def _reopen(path_fd: int, path: str, who: Identity | None, groups_set: bool) -> int:
    """A readable descriptor of the regular file ``path_fd`` names (``O_PATH``)."""
    st = os.fstat(path_fd)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFile(f"{path} is {_kind(st.st_mode)}, not a regular file: not read")
    if who is not None and not groups_set and not _readable_by(st, who):
        raise UnsafeFile(f"{path} cannot be read: permission denied (for uid {who.uid})")
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    try:
        return os.open(f"/proc/self/fd/{path_fd}", flags)
    except FileNotFoundError:  # pragma: no cover - no /proc: the type was checked just now
        return os.open(path, flags | os.O_NOFOLLOW)


def open_beneath(root: str, relative: str, *, root_fd: int | None = None) -> int:
    """A read-only descriptor of the regular file ``relative`` inside the directory
    ``root`` (which itself may be reached through links: it is the user's choice).

    ``relative`` must stay inside ``root``, links included; read with the identity of
    ``root``'s owner when this process is root (see the module docstring).
    ``FileNotFoundError`` when there is no such file, :class:`UnsafeFile` for the rest.
    """
    shown = os.path.join(root, relative)
    if os.path.isabs(relative):
        raise UnsafeFile(f"{relative} is not a path inside {root}: not read")
    own_fd = root_fd is None
    if root_fd is None:
        try:
            root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", shown) from None
        except OSError as exc:
            raise _refusal(root, exc, None) from None
    try:
        who = owner_of(os.fstat(root_fd))
        with acting_as(who) as groups_set:
            try:
                path_fd = _openat2(
                    root_fd,
                    relative,
                    os.O_PATH | os.O_CLOEXEC,
                    RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
                )
                if path_fd is None:
                    path_fd = _walk_without_links(root_fd, relative)
            except FileNotFoundError:
                raise FileNotFoundError(errno.ENOENT, "No such file or directory", shown) from None
            except OSError as exc:
                raise _refusal(shown, exc, root) from None
            try:
                return _reopen(path_fd, shown, who, groups_set)
            except OSError as exc:
                raise _refusal(shown, exc, root) from None
            finally:
                os.close(path_fd)
    finally:
        if own_fd:
            os.close(root_fd)


def open_file(path: str, *, follow: bool = True) -> int:
    """A read-only descriptor of the regular file at ``path`` (a file named by a person:
    the site config, a lock file). Symbolic links are followed unless ``follow`` is false;
    what they lead to must be a regular file."""
    flags = os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        path_fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _refusal(path, exc, None) from None
    try:
        return _reopen(path_fd, path, None, True)
    except OSError as exc:
        raise _refusal(path, exc, None) from None
    finally:
        os.close(path_fd)


def read_fd(fd: int, limit: int, path: str) -> bytes:
    """All of ``fd`` (closed afterwards), or :class:`UnsafeFile` when it holds more than
    ``limit`` bytes."""
    try:
        chunks = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnsafeFile(f"{path} is larger than {_size(limit)}: not read")
        return b"".join(chunks)
    except OSError as exc:
        raise _refusal(path, exc, None) from None
    finally:
        os.close(fd)


def read_beneath(root: str, relative: str, limit: int) -> bytes:
    """The content of ``relative`` inside ``root`` (see :func:`open_beneath`)."""
    return read_fd(open_beneath(root, relative), limit, os.path.join(root, relative))


def read_file(path: str, limit: int, *, follow: bool = True) -> bytes:
    """The content of the regular file at ``path`` (see :func:`open_file`)."""
    return read_fd(open_file(path, follow=follow), limit, path)


def read_job_file(path: str, limit: int) -> bytes:
    """A file directly in a job directory (``<job dir>/state.json``)."""
    root, name = os.path.split(path)
    return read_beneath(root or ".", name, limit)


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"
