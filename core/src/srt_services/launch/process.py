"""Processes on this machine: spawning, the environment allow-list, trees and cookies.

Every process srt starts carries the job's cookie in its environment
(:mod:`srt_services.jobdir.identity` says why), so srt can find them by cookie, and
confirm them by start time (:mod:`srt_services.procfs`), even after the orchestrator
itself died. Nothing is ever signalled by PID alone or by name.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import socket
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from srt_services import procfs
from srt_services.jobdir import identity
from srt_services.launch.sockdiag import listening_inodes
from srt_services.names import NEVER_BY_PATTERN, passthrough_split

# The /proc readers and the cookie's variable names live below the launch layer (the job
# directory needs them too); the launchers, the runtime and srt_services.extend.processes
# know them by these names.
alive = procfs.alive
proc_state = procfs.proc_state
start_ticks = procfs.start_ticks
same_process = procfs.same_process
COOKIE_VAR = identity.COOKIE_VAR
INSTANCE_VAR = identity.INSTANCE_VAR

#: What a service inherits from the orchestrator's environment; everything else it gets
#: comes from the plan. (Inherited ``SLURM_*``, ``ETCD_*``, ``NATS_*``, ``DYN_*``, loader
#: variables... never leak into a service by accident.)
INHERITED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "TMPDIR",
)
INHERITED_PREFIXES = ("LC_",)

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def become_subreaper(on: bool = True) -> bool:
    """Make orphaned descendants re-parent to this process instead of PID 1.

    A service that daemonizes then stays in our process tree, so teardown can find it and
    ``waitpid`` can reap it (no zombies left under us).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        return False


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (then every orphan of what it started
    re-parents to it, and its descendants are everything it started that still runs)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        flag = ctypes.c_int(0)
        if libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(flag), 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):  # pragma: no cover - non-Linux
        return False
    return flag.value != 0


def service_env(
    planned: Mapping[str, str],
    srt_vars: Mapping[str, str],
    passthrough: Iterable[str] = (),
    source: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Allow-listed inherited variables, then the plan's env, then srt's own variables.

    ``passthrough`` holds names and ``PREFIX_*`` patterns (the site's and the job's); a
    pattern never lets through ``SRT_*`` (another job's cookie) or a loader variable
    (:data:`~srt_services.names.NEVER_BY_PATTERN`)."""
    src = os.environ if source is None else source
    names, prefixes = passthrough_split(tuple(passthrough))
    keep = set(INHERITED_ENV) | names
    env = {
        k: v
        for k, v in src.items()
        if k in keep
        or k.startswith(INHERITED_PREFIXES)
        or (
            prefixes
            and k.startswith(prefixes)
            and not k.startswith("SRT_")
            and k not in NEVER_BY_PATTERN
        )
    }
    env.update(planned)
    env.update(srt_vars)
    return env


def wrap_preamble(argv: list[str], preamble: str | None, label: str) -> list[str]:
    """Run ``preamble`` with bash, then ``exec`` the argv unchanged (never re-parsed)."""
    if not preamble:
        return argv
    return ["bash", "-c", preamble + '\nexec "$@"', label, *argv]


@dataclass(slots=True)
class Spawned:
    popen: subprocess.Popen[bytes]
    pid: int
    start_ticks: int | None
    log_offset: int


def open_log(path: str) -> tuple[int, int]:
    """Open (append) a log for a child's stdout/stderr; return (fd, offset at open)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    return fd, os.fstat(fd).st_size


def spawn(
    argv: list[str],
    env: Mapping[str, str],
    log_path: str,
    cwd: str | None = None,
    stdin: int = subprocess.DEVNULL,
    read_ticks: bool = True,
) -> Spawned:
    """Start ``argv`` in a new session (its own process group), output appended to the log."""
    fd, offset = open_log(log_path)
    try:
        popen = subprocess.Popen(
            argv,
            env=dict(env),
            stdin=stdin,
            stdout=fd,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    # The supervisor reads the start time later, in a batch: the child is its own
    # unreaped child until then, so its PID cannot be reused meanwhile.
    return Spawned(popen, popen.pid, start_ticks(popen.pid) if read_ticks else None, offset)


def environ_of(pid: int) -> dict[str, str] | None:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def cookie_of(pid: int) -> tuple[str | None, str | None]:
    """(cookie, instance) from a process's environment, or (None, None)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None, None
    cookie = instance = None
    c = b"\0" + COOKIE_VAR.encode() + b"="
    i = b"\0" + INSTANCE_VAR.encode() + b"="
    raw = b"\0" + raw
    at = raw.find(c)
    if at >= 0:
        end = raw.find(b"\0", at + len(c))
        cookie = raw[at + len(c) : end if end >= 0 else None].decode(errors="replace")
    at = raw.find(i)
    if at >= 0:
        end = raw.find(b"\0", at + len(i))
        instance = raw[at + len(i) : end if end >= 0 else None].decode(errors="replace")
    return cookie, instance


def my_children() -> list[int]:
    """Direct children of this process (all threads), without scanning /proc."""
    out: list[int] = []
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # pragma: no cover
        import psutil

        return [p.pid for p in psutil.Process().children()]
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def pids_with_cookie(
    cookie: str, not_before_ticks: int | None = None
) -> list[tuple[int, str | None]]:
    """Every live process carrying ``cookie`` (and started no earlier than the job)."""
    found: list[tuple[int, str | None]] = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        if pid == me:
            continue
        got, instance = cookie_of(pid)
        if got != cookie:
            continue
        if not_before_ticks is not None:
            ticks = start_ticks(pid)
            if ticks is None or ticks < not_before_ticks:
                continue
        if alive(pid):
            found.append((pid, instance))
    return found


def signal_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def terminate_group(pgid: int, sig: str = "TERM") -> bool:
    """The stop signal, then SIGCONT so a stopped process can act on it (as systemd does)."""
    ok = signal_group(pgid, signal.Signals[f"SIG{sig}"])
    signal_group(pgid, signal.SIGCONT)
    return ok


def descendants(pid: int) -> list[int]:
    """``pid``'s descendants, walking ``/proc/<pid>/task/*/children`` (no full /proc scan)."""
    out: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
            out.extend(kids)
            todo.extend(kids)
    return out


def holds_socket(pid: int, inodes: set[int]) -> bool | None:
    """Whether ``pid`` has one of the socket ``inodes`` open (``None``: not allowed to look)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except PermissionError:
        return None
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and int(link[8:-1]) in inodes:
            return True
    return False


def tree_listens(root: int, port: int, extra: Iterable[int] = ()) -> bool | None:
    """Whether ``root``, a descendant, or one of ``extra`` listens on ``port``."""
    inodes = listening_inodes(port)
    if not inodes:
        return False
    unknown = False
    for pid in (root, *descendants(root), *extra):
        held = holds_socket(pid, inodes)
        if held:
            return True
        unknown = unknown or held is None
    return None if unknown else False


def port_free(address: str, port: int) -> bool:
    """Whether ``address:port`` can be bound now (cheap: one bind, no /proc scan)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except OSError as exc:
        return exc.errno != errno.EADDRINUSE
    finally:
        sock.close()
    return True


def tail(path: str, lines: int = 20, max_bytes: int = 64 * 1024) -> list[str]:
    """Last ``lines`` lines of a file, reading at most ``max_bytes`` from its end."""
    from srt_services.safefile import UnsafeFile, open_file

    try:
        fd = open_file(path)  # never a FIFO or a device a service put there
    except (OSError, UnsafeFile):
        return []
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, max_bytes, max(0, size - max_bytes))
    except OSError:
        return []
    finally:
        os.close(fd)
    text = data.decode(errors="replace").splitlines()
    return text[-lines:]
