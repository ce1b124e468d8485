"""The ``local`` launcher: every instance a process group of its own on this machine.

Virtual nodes are loopback addresses (node *i* is 127.0.0.(i+1)); they change nothing
about how a process starts, only what ``{node_ip}`` renders to. A stop signals the whole
process group, then whatever escaped it (a ``setsid`` daemon) is found among the
orchestrator's re-parented children by its ``SRT_INSTANCE`` cookie.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from typing import Any, ClassVar

from srt_services import procfs
from srt_services.extend.launcher import Launcher, Preflight
from srt_services.launch import jobprocs, portcheck, process
from srt_services.launch.cgroup import JobCgroup
from srt_services.launch.children import CommandResult, run_command
from srt_services.launch.handle import Handle
from srt_services.launch.leftovers import is_stale_local, settle_ports
from srt_services.plan.model import PlannedInstance

#: Sessions remembered for ``srt stop`` besides the instances' current ones (older attempts,
#: builds); the oldest are forgotten first.
MAX_SESSIONS = 256


class LocalLauncher(Launcher):
    name: ClassVar[str] = "local"
    summary: ClassVar[str] = "Processes on this machine; virtual nodes on 127.0.0.x."
    #: images, CPU binding and srun options are srun's; here a process is just a process
    applies: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cgroup: JobCgroup | None = None
        #: session id -> step of every process this launcher started (the newest last)
        self._sessions: dict[int, str] = {}
        #: the orchestrator leaving the job's cgroup during the teardown
        self._leaving: threading.Thread | None = None

    async def prepare(self) -> None:
        cookie = self.options.get("cookie")
        if cookie and self.cgroup is None:
            self.cgroup = JobCgroup.create(str(cookie))

    def _started(self, pid: int, step: str) -> None:
        """A process of ``step`` started: put it in its cgroup leaf, remember its session."""
        if self.cgroup is not None:
            self.cgroup.adopt(pid, step)
        self._sessions.pop(pid, None)
        self._sessions[pid] = step
        if len(self._sessions) > MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        argv = process.wrap_preamble(instance.argv, instance.preamble, f"srt:{instance.step}")
        cwd = instance.cwd
        started_wall = time.time()
        spawned = process.spawn(argv, env, log_path, cwd=cwd, read_ticks=False)
        self._started(spawned.pid, instance.step)
        return Handle(
            step=instance.step,
            unit=instance.unit,
            node=instance.node,
            pid=spawned.pid,
            pgid=spawned.pid,
            start_ticks=spawned.start_ticks,
            log_path=log_path,
            log_offset=spawned.log_offset,
            started_wall=started_wall,
            started_mono=time.monotonic(),
            popen=spawned.popen,
            extra={"stop_signal": instance.stop_signal},
        )

    async def finish(self) -> None:
        # every virtual node is this machine: one tree to remove
        if self.plan.local_dir:
            shutil.rmtree(self.plan.local_dir, ignore_errors=True)

    async def terminate(self, handles: list[Handle]) -> None:
        for h in handles:
            process.terminate_group(h.pgid, h.extra.get("stop_signal", "TERM"))

    async def kill(self, handles: list[Handle]) -> None:
        for h in handles:
            process.signal_group(h.pgid, signal.SIGKILL)

    def owns_listener(self, handle: Handle, port: int) -> bool | None:
        # escaped daemons of this instance are our children carrying its step in the cookie
        watched = self.watcher.watched_pids() if self.watcher is not None else set()
        escaped = [
            pid
            for pid in process.my_children()
            if pid not in watched and process.cookie_of(pid)[1] == handle.step
        ]
        return process.tree_listens(handle.pid, port, escaped)

    async def preflight(self, instances: list[PlannedInstance]) -> Preflight:
        names = {
            (i.node_ip, p): f"{i.step}: port {p} on {i.node} ({i.node_ip})"
            for i in instances
            for p in i.ports
        }
        if not names:
            return Preflight()
        return await settle_ports(list(names), self._check, self._reap, is_stale_local, names)

    async def _check(self, targets: list[tuple[str, int]]) -> list[portcheck.PortReport]:
        return portcheck.check(targets)

    async def _reap(self, holders: list[portcheck.Holder]) -> None:
        for h in holders:
            if h.pid is not None and h.start_ticks is not None:
                portcheck.reap(h.pid, h.start_ticks)

    def stray_processes(self, cookie: str) -> dict[int, str | None]:
        """Processes of the job outside its instances' process groups: pid -> step.

        With a job cgroup, its members (each leaf is a step); without one, our children
        that are not instances (as a child subreaper we inherit every orphan of the job),
        the members of the sessions we created, and the descendants of both (see
        :mod:`srt_services.launch.jobprocs`). A process whose own group is an instance's
        is not listed: stopping the instance's group stops it.
        """
        watched = self.watcher.watched_pids() if self.watcher is not None else set()
        roots = [p for p in process.my_children() if p not in watched]
        if self.cgroup is not None and not roots and self.cgroup.empty():
            return {}  # the kernel says nothing of the job is left: no leaf to read
        if self.cgroup is not None:
            found = self.cgroup.members()
            for pid in roots:
                found.setdefault(pid, None)
            found = {
                pid: step if step is not None else _cookie_step(pid, cookie)
                for pid, step in found.items()
            }
        else:
            found = jobprocs.find(cookie, sessions=self._sessions, roots=roots, by_cookie=False)
        out: dict[int, str | None] = {}
        for pid, step in found.items():
            if pid in watched:
                continue
            ids = procfs.stat_ids(pid)
            if ids is None or ids[1] in watched:  # in a running instance's (or build's) group
                continue
            if jobprocs.foreign_live(process.environ_of(pid) or {}, cookie):
                continue
            out[pid] = step
        return out

    def sweep(self, steps: list[str] | None = None) -> None:
        if self.cgroup is None or self.cgroup.empty():
            return
        if steps is None:
            self.cgroup.kill()
            return
        for step in steps:
            self.cgroup.kill(step)

    def cgroup_path(self) -> str | None:
        return self.cgroup.path if self.cgroup is not None else None

    def sessions(self) -> dict[int, str]:
        return dict(self._sessions)

    def teardown_started(self) -> None:
        if self.cgroup is not None and self._leaving is None:
            self._leaving = threading.Thread(
                target=self.cgroup.leave, name="srt-cgroup-leave", daemon=True
            )
            self._leaving.start()

    def close(self) -> None:
        if self._leaving is not None:
            self._leaving.join()
            self._leaving = None
        if self.cgroup is not None and self.cgroup.remove():
            self.cgroup = None  # gone; a cgroup still holding a survivor stays recorded

    async def run_oneshot(
        self,
        argv: list[str],
        node: str,
        log_path: str,
        env: dict[str, str],
        timeout: float,
        cwd: str | None = None,
        container: str | None = None,
    ) -> CommandResult:
        step = os.path.basename(log_path).removesuffix(".out")
        leaf = self.cgroup
        return await run_command(
            self.watcher,
            argv,
            timeout,
            env=env,
            cwd=cwd,
            stdout_path=log_path,
            on_spawn=lambda pid: self._started(pid, step),
            on_kill=(lambda: leaf.kill(step)) if leaf is not None else None,
        )


def _cookie_step(pid: int, cookie: str) -> str | None:
    """The step a process's cookie names, when the cookie is this job's."""
    got, instance = process.cookie_of(pid)
    return instance if got == cookie else None
