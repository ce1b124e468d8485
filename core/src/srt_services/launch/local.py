"""The ``local`` launcher: every instance a process group of its own on this machine.

Virtual nodes are loopback addresses (node *i* is 127.0.0.(i+1)); they change nothing
about how a process starts, only what ``{node_ip}`` renders to. In the plan's
``namespaces`` network mode every virtual node is a network namespace of its own on a
private bridge (:mod:`srt_services.launch.netns`): :meth:`LocalLauncher.prepare` makes
them, every instance is started inside its node's, the frontend's port is relayed from
127.0.0.1 (:mod:`srt_services.launch.relay`), and :meth:`LocalLauncher.finish` removes
them once every process is gone. A stop signals the whole
process group, then whatever escaped it (a ``setsid`` daemon) is found among the
orchestrator's re-parented children by its ``SRT_INSTANCE`` cookie.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import threading
import time
from typing import Any, ClassVar

from srt_services import procfs
from srt_services.contracts.handle import CommandResult, Handle
from srt_services.contracts.launcher import Launcher, LaunchFailed, Preflight
from srt_services.contracts.plan import LocalNetwork, PlannedInstance
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.launch import jobprocs, netns, portcheck, process
from srt_services.launch.cgroup import JobCgroup
from srt_services.launch.children import run_command
from srt_services.launch.relay import Relay

#: Sessions remembered for ``srt stop`` besides the instances' current ones (older attempts,
#: builds); the oldest are forgotten first.
MAX_SESSIONS = 256


class LocalLauncher(Launcher):
    name: ClassVar[str] = "local"
    summary: ClassVar[str] = "Processes on this machine; virtual nodes on 127.0.0.x."
    #: images, CPU binding and srun options are srun's; here a process is just a process
    applies: ClassVar[frozenset[str]] = frozenset()

    #: what the job's cgroup name carries besides the cookie (a node agent: its node)
    cgroup_tag: str = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cgroup: JobCgroup | None = None
        #: session id -> step of every process this launcher started (the newest last)
        self._sessions: dict[int, str] = {}
        #: the orchestrator leaving the job's cgroup during the teardown
        self._leaving: threading.Thread | None = None
        #: this process's start (clock ticks): nothing older is the job's
        self._born = procfs.start_ticks(os.getpid())
        net = self.plan.local_network
        #: the plan's namespaces (``None``: shared mode, or not a local plan)
        self.network = net if net is not None and net.mode == "namespaces" else None
        self._relay: Relay | None = None
        #: what of the network could not be removed (reported after :meth:`finish`)
        self._net_left: list[str] = []

    async def prepare(self) -> None:
        cookie = self.settings.cookie
        if cookie and self.cgroup is None:
            self.cgroup = JobCgroup.create(cookie, self.cgroup_tag)
        if self.network is not None and self._relay is None:
            await self._make_network(self.network)

    async def _make_network(self, net: LocalNetwork) -> None:
        """The bridge and namespaces, then the relays; a failure ends the job before its
        first launch (:meth:`finish` removes whatever was made)."""
        self._relay = Relay()
        try:
            await asyncio.to_thread(netns.create, net)
        except netns.NetworkError as exc:
            raise LaunchFailed(f"cannot make the job's network namespaces: {exc}") from None
        for f in net.forwards:
            port, node = int(f["port"]), str(f["node"])
            try:
                await self._relay.add(port, str(f["address"]), port)
            except OSError as exc:
                raise LaunchFailed(
                    f"cannot forward 127.0.0.1:{port} to {f['unit']} on {node}"
                    f" ({f['address']}): {exc.strerror or exc}",
                    node=node,
                ) from None

    def _started(self, pid: int, step: str) -> None:
        """A process of ``step`` started: put it in its cgroup leaf, remember its session."""
        if self.cgroup is not None:
            self.cgroup.adopt(pid, step)
        self._sessions.pop(pid, None)
        self._sessions[pid] = step
        if len(self._sessions) > MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]

    def adopt_started(self, pid: int, step: str) -> None:
        """A process of ``step`` that a node agent started before it had this launcher
        (its first part, which does not load it): from now on it is this launcher's."""
        self._started(pid, step)

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        argv = process.wrap_preamble(instance.argv, instance.preamble, f"srt:{instance.step}")
        if self.network is not None:
            argv = netns.enter_argv(self.network, instance.node, argv)
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
        if self._relay is not None:
            await self._relay.close()
        if self.network is not None:
            self._net_left = await asyncio.to_thread(netns.remove, self.network)

    def unkillable(self) -> list[str]:
        return [f"the job's network could not be removed: {what}" for what in self._net_left]

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
        return process.tree_listens(handle.pid, port, escaped, own_netns=self.network is not None)

    async def preflight(self, instances: list[PlannedInstance]) -> Preflight:
        # here, not at the top: a node agent runs this launcher and never needs it, and
        # it reads job directories (pydantic) that the agent's start should not pay for
        from srt_services.launch.leftovers import is_stale_local, settle_ports

        if self.network is not None:
            # each node's ports are in a namespace the job just made: nothing else holds
            # them; the relayed ones on 127.0.0.1 were bound in prepare()
            return Preflight()
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

    def stray_processes(self, cookie: str, final: bool = False) -> dict[int, str | None]:
        """Processes of the job outside its instances' process groups: pid -> step.

        With a job cgroup, its members (each leaf is a step). Without one, the
        orchestrator's descendants: as the job's child subreaper it inherits every orphan
        of the job, so a walk down its process tree (O(job)) finds them, each with the step
        of the session srt created it in, or of its cookie (see
        :mod:`srt_services.launch.jobprocs`). The ``final`` look (and any look when this
        process is not a subreaper) reads every process of the machine for the sessions
        srt created and the cookie, with or without a cgroup. A process whose own group is an instance's is not
        listed: stopping the instance's group stops it.
        """
        watched = self.watcher.watched_pids() if self.watcher is not None else set()
        if self.cgroup is None:
            if not final and process.is_subreaper():
                return jobprocs.below(os.getpid(), cookie, sessions=self._sessions, skip=watched)
            roots = [p for p in process.my_children() if p not in watched]
            found = jobprocs.find(
                cookie,
                sessions=self._sessions,
                roots=roots,
                not_before=self._born,
                by_cookie=final,
            )
            return {p: s for p, s in found.items() if not _in_group_of(p, watched)}
        roots = [p for p in process.my_children() if p not in watched]
        found = {} if not roots and self.cgroup.empty() else self.cgroup.members()
        for pid in roots:
            found.setdefault(pid, None)
        if final:
            # a process that left the cgroup (root may move itself into another one) still
            # carries the session srt made or the cookie: the last look reads every process
            found = jobprocs.find(
                cookie, sessions=self._sessions, roots=roots, not_before=self._born, known=found
            )
        if not found:
            return {}  # the kernel says nothing of the job is left: no leaf to read
        out: dict[int, str | None] = {}
        for pid, step in found.items():
            if _in_group_of(pid, watched):
                continue
            env = jobprocs.job_environ(pid)
            if jobprocs.foreign_live(env, cookie):
                continue
            if step is None and env.get(COOKIE_VAR) == cookie:
                step = env.get(INSTANCE_VAR)
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
            self.children,
            argv,
            timeout,
            env=env,
            cwd=cwd,
            stdout_path=log_path,
            on_spawn=lambda pid: self._started(pid, step),
            on_kill=(lambda: leaf.kill(step)) if leaf is not None else None,
        )


def _in_group_of(pid: int, watched: set[int]) -> bool:
    """Whether ``pid`` is one of ``watched`` or in the process group of one (a running
    instance or build: stopping it stops the group); a process gone counts as in."""
    if pid in watched:
        return True
    ids = procfs.stat_ids(pid)
    return ids is None or ids[1] in watched
