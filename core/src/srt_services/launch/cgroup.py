"""A cgroup (v2) per job: the kernel's own list of every process the job started.

Whatever a service does (double fork, ``setsid``, ``env -i``, a foreign ``SRT_JOB_COOKIE``),
its processes stay in the cgroup they were born in unless someone with write access to the
cgroup tree moves them. So where the host lets srt create a cgroup, the job gets one::

    <the orchestrator's cgroup>/srt-<cookie>/
        srt-orchestrator/   the orchestrator itself while the job runs, so that whatever it
                            starts is born inside the job's cgroup
        <step>/             every process of one instance (or build), all attempts

and each launched process is moved into its step's leaf right after it starts (anything it
forked in between stays in ``srt-orchestrator`` and is still the job's). Stopping a step
then ends with ``cgroup.kill``, which the kernel applies atomically against concurrent
forks, and ``cgroup.events`` says when the last process is gone.

Where there is no writable cgroup v2 (no root, a cgroup managed by systemd that was not
delegated, cgroup v1 only) or ``SRT_CGROUP=off`` is set, :meth:`JobCgroup.create` returns
``None`` and the runtime falls back to the subreaper, the sessions and process groups it
created and the cookie.
"""

from __future__ import annotations

import os
import time

# Every node agent makes its job's cgroup before its first launch: this module keeps off
# contextlib, collections and signal's enums (~10 ms of an agent's CPU there).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from signal import SIGKILL  # typeshed has no stub of _signal
else:
    from _signal import SIGKILL

#: Set to ``off`` (or ``0``) to run without a job cgroup (tests force the fallback this way).
ENV_SWITCH = "SRT_CGROUP"
ORCHESTRATOR_LEAF = "srt-orchestrator"
PREFIX = "srt-"


def _cgroup2_mount() -> str | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                if right.split(" ", 1)[0] == "cgroup2":
                    fields = left.split()
                    if fields[3] == "/":
                        return fields[4]
    except OSError:
        return None
    return None


def _own_cgroup(mount: str) -> str | None:
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("0::"):
                    rel = line[3:].strip()
                    return os.path.join(mount, rel.lstrip("/"))
    except OSError:
        return None
    return None


def _systemd_owned(path: str) -> bool:
    """Whether systemd manages ``path`` without having delegated it to us."""
    try:
        with open("/proc/1/comm", encoding="utf-8") as fh:
            if fh.read().strip() != "systemd":
                return False
    except OSError:
        return False
    for attr in ("trusted.delegate", "user.delegate"):
        try:
            if os.getxattr(path, attr):
                return False
        except OSError:
            pass
    return True


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as fh:
        fh.write(text)


def _read_pids(leaf: str) -> list[int]:
    # os.open/os.read rather than open(): a teardown reads every leaf, and the text layer
    # costs more than the read itself
    try:
        fd = os.open(os.path.join(leaf, "cgroup.procs"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        data = os.read(fd, 65536)
        while len(data) % 65536 == 0 and data:
            more = os.read(fd, 65536)
            if not more:
                break
            data += more
    except OSError:
        return []
    finally:
        os.close(fd)
    try:
        return [int(x) for x in data.split()]
    except ValueError:
        return []


def _populated(cgroup: str) -> bool:
    """Whether any process is in ``cgroup`` or below it (``cgroup.events``; zombies do not
    count). A cgroup that cannot be read counts as populated: the caller then acts."""
    try:
        fd = os.open(os.path.join(cgroup, "cgroup.events"), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        data = os.read(fd, 4096)
    except OSError:
        return True
    finally:
        os.close(fd)
    return b"populated 0" not in data


def _rmdir_below(cgroup: str) -> None:
    """Remove the cgroups a service made below its leaf (those that are empty)."""
    for root, dirs, _ in os.walk(cgroup, topdown=False):
        for d in dirs:
            try:
                os.rmdir(os.path.join(root, d))
            except OSError:
                pass


def cgroup_name(cookie: str, tag: str = "") -> str:
    """The name of the job's cgroup: ``srt-<cookie>``, ``srt-<cookie>-<tag>`` with a tag."""
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in tag)
    return PREFIX + cookie[:16] + (f"-{safe}" if safe else "")


def disabled() -> bool:
    return os.environ.get(ENV_SWITCH, "").strip().lower() in {"0", "off", "no", "false"}


class JobCgroup:
    """The job's cgroup: create it, put processes in their step's leaf, list and kill them."""

    def __init__(self, path: str, home: str | None = None) -> None:
        self.path = path
        #: where the orchestrator came from (``None``: not moved, e.g. ``srt stop``)
        self.home = home
        #: the orchestrator is not in the job's cgroup (never was, or has left it)
        self.outside = home is None
        self._leaves: set[str] = set()

    # ------------------------------------------------------------------ lifetime

    @classmethod
    def create(cls, cookie: str, tag: str = "") -> JobCgroup | None:
        """A new cgroup for the job with the orchestrator inside; ``None`` where impossible.

        ``tag`` tells apart the cgroups of one job that share a kernel (the node agents of
        a test cluster whose nodes are network namespaces of one machine)."""
        if disabled():
            return None
        mount = _cgroup2_mount()
        home = _own_cgroup(mount) if mount else None
        if home is None or not os.path.isdir(home) or _systemd_owned(home):
            return None
        path = os.path.join(home, cgroup_name(cookie, tag))
        try:
            os.mkdir(path)
        except OSError:
            return None
        group = cls(path, home)
        try:
            os.mkdir(os.path.join(path, ORCHESTRATOR_LEAF))
            _write(os.path.join(path, ORCHESTRATOR_LEAF, "cgroup.procs"), str(os.getpid()))
        except OSError:
            group.remove()
            return None
        return group

    @classmethod
    def existing(
        cls, path: str | None, cookie: str | None = None, tag: str = ""
    ) -> JobCgroup | None:
        """The cgroup a job recorded, if it still exists and looks like one srt made (for
        the job whose ``cookie`` is given: its name carries it, so a state file naming
        another job's cgroup never makes ``srt stop`` kill that job)."""
        if not path or not os.path.basename(path).startswith(PREFIX):
            return None
        if cookie is not None and os.path.basename(path) != cgroup_name(cookie, tag):
            return None
        mount = _cgroup2_mount()
        if mount is None or not os.path.realpath(path).startswith(mount.rstrip("/") + "/"):
            return None
        if not os.path.isfile(os.path.join(path, "cgroup.procs")):
            return None
        return cls(path)

    def leave(self) -> None:
        """Move the orchestrator back where it came from (nothing it starts afterwards is
        the job's). The first cgroup move after a while waits for an RCU grace period in
        the kernel (about 15 ms here), so the teardown does it in a thread while it waits
        for the job's processes to exit (see ``LocalLauncher.teardown_started``)."""
        home, self.home = self.home, None
        if home is not None:
            try:
                _write(os.path.join(home, "cgroup.procs"), str(os.getpid()))
                self.outside = True
            except OSError:
                pass

    def empty(self) -> bool:
        """Whether nothing of the job is left in its cgroup: one read of the kernel's count,
        which answers only once the orchestrator itself has left (:meth:`leave`)."""
        return self.outside and not _populated(self.path)

    def remove(self, wait: float = 1.0) -> bool:
        """Move the orchestrator back where it came from and delete the job's cgroups.

        A leaf still holding a process (one that survived SIGKILL) cannot be removed; the
        rest is, and ``False`` says something was left.
        """
        self.leave()
        deadline = time.monotonic() + wait
        pause = 0.0005
        while True:
            left = self._rmdir_tree()
            if not left or time.monotonic() >= deadline:
                return not left
            time.sleep(pause)  # the last exits are still being reaped by the kernel
            pause = min(pause * 2, 0.01)

    def _rmdir_tree(self) -> bool:
        left = False
        for _, leaf in list(self._leaf_dirs()):
            try:
                os.rmdir(leaf)  # the usual leaf: no cgroup below it, nothing in it
                continue
            except FileNotFoundError:
                continue
            except OSError:
                pass
            _rmdir_below(leaf)
            try:
                os.rmdir(leaf)
            except FileNotFoundError:
                pass
            except OSError:
                left = True
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            left = True
        return left

    # ------------------------------------------------------------------ members

    def leaf(self, step: str) -> str:
        return os.path.join(self.path, step)

    def adopt(self, pid: int, step: str) -> bool:
        """Move ``pid`` (just started) into its step's leaf."""
        leaf = self.leaf(step)
        if step not in self._leaves:
            try:
                os.mkdir(leaf)
            except FileExistsError:
                pass
            except OSError:
                return False
            self._leaves.add(step)
        try:
            _write(os.path.join(leaf, "cgroup.procs"), str(pid))
        except OSError:
            return False
        return True

    def _leaf_dirs(self) -> Iterator[tuple[str, str]]:
        try:
            entries = list(os.scandir(self.path))
        except OSError:
            return
        for entry in entries:
            if not entry.name.startswith("cgroup.") and entry.is_dir(follow_symlinks=False):
                yield entry.name, entry.path

    def _descendants(self) -> int:
        """How many cgroups the job's has below it (``cgroup.stat``)."""
        try:
            with open(os.path.join(self.path, "cgroup.stat"), encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "nr_descendants":
                        return int(value)
        except (OSError, ValueError):
            pass
        return -1

    def members(self, step: str | None = None) -> dict[int, str | None]:
        """pid -> step of every process in the job's cgroup (or in one step's leaf).

        Processes of the orchestrator's leaf (forked before they were moved) have no step;
        the orchestrator itself is never listed.
        """
        me = os.getpid()
        out: dict[int, str | None] = {}
        leaves = [(step, self.leaf(step))] if step is not None else list(self._leaf_dirs())
        # a service may make cgroups of its own below its leaf: walk only when there are any
        nested = step is not None or self._descendants() != len(leaves)
        for name, leaf in leaves:
            owner = None if name == ORCHESTRATOR_LEAF else name
            dirs = [root for root, _, _ in os.walk(leaf)] if nested else [leaf]
            for d in dirs:
                for pid in _read_pids(d):
                    if pid != me:
                        out[pid] = owner
        if step is None:
            for pid in _read_pids(self.path):  # moved there by someone else
                if pid != me:
                    out[pid] = None
        return out

    def kill(self, step: str | None = None) -> None:
        """SIGKILL every process of a step's leaf (``None``: the whole job but the
        orchestrator). ``cgroup.kill`` where the kernel has it (5.14+), else a kill loop."""
        if step is not None:
            leaf = self.leaf(step)
            if _populated(leaf):  # a read; writing cgroup.kill costs ten times that
                self._kill_leaf(leaf)
            return
        for name, leaf in self._leaf_dirs():
            if name == ORCHESTRATOR_LEAF:
                me = os.getpid()
                for pid in _read_pids(leaf):
                    if pid != me:
                        try:
                            os.kill(pid, SIGKILL)
                        except OSError:
                            pass
            elif _populated(leaf):
                # an empty leaf costs a read; writing cgroup.kill costs ten times that
                self._kill_leaf(leaf)

    @staticmethod
    def _kill_leaf(leaf: str) -> None:
        try:
            _write(os.path.join(leaf, "cgroup.kill"), "1")
            return
        except FileNotFoundError:
            if not os.path.isdir(leaf):
                return
        except OSError:
            return
        for _ in range(100):  # no cgroup.kill: kill until nothing is left to fork
            pids = [p for root, _, _ in os.walk(leaf) for p in _read_pids(root)]
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, SIGKILL)
                except OSError:
                    pass
