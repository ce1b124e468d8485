"""The ``slurm`` launcher (used by the orchestrator inside the allocation ``srt apply`` made).

The plan says how each instance starts (``PlannedInstance.via``): as a step of its own
(below), or through its node's srt agent (:mod:`.agents`: one step for the whole
allocation runs an agent on every node). One launcher does both, so a job whose plan
chose agents still runs an instance that needs what only ``srun`` applies (an image, a CPU
binding, srun options) as its own step.

Each instance that is its own step is a named step: ``srun --overlap --nodes=1 --ntasks=1 --nodelist=<node>
--job-name=<step> --output=<log>``. The srun client is the local process the runtime
watches; its exit is the task's exit (a task killed by signal N makes srun exit 128+N, a
failed node makes it exit 0, which a critical service's supervision treats as a failure).

Stopping never signals the srun client: srun turns SIGTERM into SIGKILL of the task. The
step is signalled with ``scancel --signal=TERM <job>.<step>`` (one scancel for a whole
tier, so every step of a tier is signalled at once) while srun keeps waiting for it, then
``scancel --signal=KILL``. Graces are cut so that a full teardown fits inside the cluster's
KillWait: when Slurm itself cancels the job it SIGKILLs everything after KillWait.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, ClassVar

from srt_services.contracts.allocation import Allocation, AllocationRequest
from srt_services.contracts.handle import CommandResult, Handle
from srt_services.contracts.launcher import Launcher, LaunchSettings, Preflight
from srt_services.contracts.plan import PlannedInstance, PlannedProbe
from srt_services.launch import portcheck, process
from srt_services.launch.children import run_command
from srt_services.launch.leftovers import is_stale_local, settle_ports
from srt_services.launch.slurm import commands
from srt_services.launch.slurm.agents import AgentError, AgentFleet, EarlyAgents, start_early
from srt_services.launch.slurm.agents_step import AGENT_ENV, EARLY_VAR, FleetConfig
from srt_services.launch.slurm.allocation import SlurmError, current_allocation, kill_wait
from srt_services.launch.slurm.batchhost import local_address, pick_ipv4, slurm_env
from srt_services.launch.slurm.nodelocal import own_tree

#: Seconds kept free below KillWait for the final sweep and writing the result.
KILLWAIT_MARGIN = 1.5
#: Shutdown tiers that may each need a grace.
TIERS = 3
STEP_LOOKUP_TRIES = 10
#: Seconds the removal of the node-local tree may take on one node (all nodes at once).
CLEANUP_TIMEOUT = 15.0
#: How long an agent's last sweep may wait for SIGKILLed processes to disappear.
KILL_WAIT = 5.0
PORTCHECK = "srt_services.launch.portcheck"


class SlurmLauncher(Launcher):
    name: ClassVar[str] = "slurm"
    summary: ClassVar[str] = (
        "Inside the allocation: an `srun --overlap` step per instance, or one srt agent per"
        " node (slurm.launcher)."
    )
    local_processes: ClassVar[bool] = False
    spans_nodes: ClassVar[bool] = True
    #: agents started with the allocation, by job directory, until ``prepare`` takes them
    _early: ClassVar[dict[str, EarlyAgents]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill_wait_s = 30.0
        self.aliases: dict[str, str] = {}
        self.mounts: list[str] = []
        self.extra: list[str] = []
        self._ip_node: dict[str, str] = {}
        self._shared: dict[str, bool] = {}
        #: the node agents, when the plan starts any instance through one
        self.agents: AgentFleet | None = None
        self._step_node = {i.step: i.node for i in self.plan.instances()}
        self._unkillable: list[str] = []
        self._grace = {u.name: u.stop_grace for u in self.plan.units}

    @classmethod
    def allocation(
        cls, request: AllocationRequest, needed: int, settings: LaunchSettings | None = None
    ) -> Allocation:
        interface = settings.network_interface if settings is not None else None
        job_dir = request.job_dir or os.getcwd()
        told = None
        if os.environ.get(EARLY_VAR) == "1":
            # the batch script says the plan starts instances through agents: start them
            # now, and let them tell their nodes' addresses (no lookup step of its own)
            def told(job_id: str, names: list[str]) -> dict[str, str]:
                try:
                    early = start_early(cls._early_config(job_id, job_dir, names, settings))
                except OSError:
                    return {}  # the lookup step, and the agents after the plan, as before
                cls._early[job_dir] = early
                return early.addresses()

        alloc = current_allocation(job_dir, interface, told=told)
        if len(alloc.nodes) < needed:
            raise SlurmError(
                f"the allocation has {len(alloc.nodes)} node(s) but the recipe needs {needed}"
            )
        return alloc

    @classmethod
    def _early_config(
        cls, job_id: str, job_dir: str, nodes: list[str], settings: LaunchSettings | None
    ) -> FleetConfig:
        """What the agents started with the allocation need (the rest of the job's
        setup goes out once the plan is made)."""
        s = settings or LaunchSettings()
        address = local_address(s.network_interface)
        return FleetConfig(
            job_id=job_id,
            job_name="",
            job_dir=job_dir,
            cookie="",
            nodes=nodes,
            advertise=address or "127.0.0.1",
            bind=address or "0.0.0.0",  # noqa: S104 - agents on other nodes connect here
            local_dir=None,
            start_timeout=s.agent_start_timeout,
            lost_after=s.agent_lost_after,
            srun_extra=list(s.srun_extra),
            python=sys.executable,
            env=_agent_env(),
            interface=s.network_interface,
        )

    @property
    def job_id(self) -> str:
        return self.plan.job_id

    async def prepare(self) -> None:
        self.aliases = dict(self.settings.container_aliases)
        self.mounts = list(self.settings.container_mounts)
        self.extra = list(self.settings.srun_extra)
        try:
            self.kill_wait_s = kill_wait()
        except SlurmError:
            self.kill_wait_s = 30.0
        early = self._early.pop(self.job_dir, None)
        if any(i.via == "agent" for i in self.plan.instances()):
            self.agents = AgentFleet(self._fleet_config(), self.children, self.notices)
            await self.agents.start(early)
        elif early is not None:
            early.close()

    def _fleet_config(self) -> FleetConfig:
        here = os.environ.get("SLURMD_NODENAME") or os.uname().nodename.split(".")[0]
        address = next((n.ip for n in self.plan.nodes if n.name == here), None)
        if address is None:
            # the batch host is not one of the plan's nodes: listen everywhere, and give
            # the agents the address the node reports for itself
            probe = subprocess_text(["hostname", "-I"])
            address = pick_ipv4(probe) or "127.0.0.1"
            bind = "0.0.0.0"  # noqa: S104 - agents on other nodes connect here
        else:
            bind = address
        env = _agent_env()
        return FleetConfig(
            job_id=self.job_id,
            job_name=self.plan.job_name,
            job_dir=self.job_dir,
            cookie=self.settings.cookie,
            nodes=[n.name for n in self.plan.nodes],
            advertise=address,
            bind=bind,
            local_dir=self.plan.local_dir,
            start_timeout=self.settings.agent_start_timeout,
            lost_after=self.settings.agent_lost_after,
            srun_extra=list(self.settings.srun_extra),
            python=sys.executable,
            env=env,
        )

    def _agent(self, h: Handle) -> bool:
        return self.agents is not None and h.extra.get("via") == "agent"

    def _env(self, env: dict[str, str]) -> dict[str, str]:
        out = dict(env)
        out.update({k: v for k, v in slurm_env().items() if k == "SLURM_CONF"})
        return out

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        if instance.via == "agent" and self.agents is not None:
            grace = self.stop_budget(self._grace.get(instance.unit, 10.0))
            follow = _followed(instance, log_path)
            return self.agents.launch(instance, env, log_path, grace, follow)
        argv = commands.srun_argv(
            instance, self.job_id, log_path, self.job_dir, self.aliases, self.mounts, self.extra
        )
        started_wall = time.time()
        spawned = process.spawn(argv, self._env(env), log_path, read_ticks=False)
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
            extra={
                "job_id": self.job_id,
                "step_name": instance.step,
                "stop_signal": instance.stop_signal,
            },
        )

    def watch_exit(self, handle: Handle, callback: Callable[[int], None]) -> None:
        if self.agents is not None and self._agent(handle):
            self.agents.watch_exit(handle, callback)
        else:
            super().watch_exit(handle, callback)

    def owns_listener(self, handle: Handle, port: int) -> bool | None:
        if self.agents is not None and self._agent(handle):
            return self.agents.owns_listener(handle, port)
        return None

    async def _step_ids(self, names: set[str]) -> dict[str, str]:
        """``<job>.<step>`` of each named step still known to Slurm."""
        result = await run_command(
            self.children,
            ["squeue", "-h", "-s", "-j", self.job_id, "-o", "%i %j"],
            30.0,
            env=slurm_env(),
        )
        found: dict[str, str] = {}
        for line in result.stdout.splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[1].strip() in names:
                found.setdefault(parts[1].strip(), parts[0])
        return found

    async def _live_step_ids(self, live: list[Handle]) -> dict[str, str]:
        """``<job>.<step>`` of each handle's step, retrying briefly for steps Slurm has not
        registered yet (one just launched); each found id is kept in the handle."""
        ids: dict[str, str] = {}
        for attempt in range(STEP_LOOKUP_TRIES):
            ids.update(await self._step_ids({h.step for h in live} - set(ids)))
            missing = [h for h in live if h.step not in ids and h.returncode is None]
            if not missing or attempt == STEP_LOOKUP_TRIES - 1:
                break
            await asyncio.sleep(0.05)
        for h in live:
            if h.step in ids:
                h.extra["step_id"] = ids[h.step]
        return ids

    async def _signal(self, handles: list[Handle], sig: str) -> None:
        live = [h for h in handles if h.returncode is None]
        if not live:
            return
        ids = await self._live_step_ids(live)
        by_signal: dict[str, list[str]] = {}
        for h in live:
            if h.step in ids:
                # a TERM is each step's own stop signal; a KILL is a KILL
                chosen = h.extra.get("stop_signal", "TERM") if sig == "TERM" else sig
                by_signal.setdefault(chosen, []).append(ids[h.step])
        # One scancel per signal for the whole tier. It may report "Invalid job id" for a
        # step that ended meanwhile while still signalling the others; exits tell the truth.
        await asyncio.gather(
            *(
                run_command(
                    self.children, ["scancel", f"--signal={s}", *targets], 30.0, env=slurm_env()
                )
                for s, targets in by_signal.items()
            )
        )
        if sig == "KILL":
            # a step Slurm no longer knows, or an srun stuck after its step: end the client
            for h in live:
                if h.step not in ids and h.returncode is None:
                    process.signal_pid(h.pid, signal.SIGKILL)

    def _split(self, handles: list[Handle]) -> tuple[list[Handle], list[Handle]]:
        """(attempts an agent runs, attempts that are steps of their own)."""
        mine = [h for h in handles if self._agent(h) and h.returncode is None]
        return mine, [h for h in handles if not self._agent(h)]

    async def terminate(self, handles: list[Handle]) -> None:
        by_agent, steps = self._split(handles)
        if self.agents is not None and by_agent:
            self.agents.signal(by_agent, "TERM")
        if steps:
            await self._signal(steps, "TERM")

    async def kill(self, handles: list[Handle]) -> None:
        by_agent, steps = self._split(handles)
        if self.agents is not None and by_agent:
            self.agents.signal(by_agent, "KILL")
        if not steps:
            return
        await self._signal(steps, "KILL")
        await asyncio.sleep(0.5)
        for h in steps:
            if h.returncode is None:
                process.signal_pid(h.pid, signal.SIGKILL)

    def sweep(self, steps: list[str] | None = None) -> None:
        """On the agents' nodes, through their cgroups and scans (a step of its own is
        Slurm's to sweep: its processes end with it)."""
        if self.agents is not None:
            self.agents.sweep(steps, self._step_node)

    async def preflight(self, instances: list[PlannedInstance]) -> Preflight:
        names = {
            (i.node_ip, p): f"{i.step}: port {p} on {i.node} ({i.node_ip})"
            for i in instances
            for p in i.ports
        }
        if not names:
            return Preflight()
        self._ip_node = {i.node_ip: i.node for i in instances}
        return await settle_ports(list(names), self._check_ports, self._reap, self._stale, names)

    async def _portcheck(self, node: str, args: list[str]) -> list[portcheck.PortReport]:
        if self.agents is not None and self.agents.available(node):
            targets = [a.rpartition(":")[::2] for a in args if not a.startswith("-")]
            reap = [
                [int(x) for x in args[i + 1].split(":")]
                for i, a in enumerate(args)
                if a == "--reap"
            ]
            try:
                doc = await self.agents.call(
                    node, "ports", {"targets": targets, "reap": reap}, 60.0
                )
            except AgentError as exc:
                raise SlurmError(f"port check on {node} failed: {exc}") from None
            return portcheck.reports_from_json(json.dumps(doc))
        argv = self._helper(node, "srt-preflight", sys.executable, "-m", PORTCHECK, *args)
        result = await run_command(
            self.children, argv, 60.0, env=self._env(process.service_env({}, {}))
        )
        if not result.ok:
            raise SlurmError(f"port check on {node} failed: {result.stderr.strip()[-300:]}")
        return portcheck.reports_from_json(result.stdout)

    async def _check_ports(self, targets: list[tuple[str, int]]) -> list[portcheck.PortReport]:
        by_node: dict[str, list[str]] = {}
        for ip, port in targets:
            by_node.setdefault(self._ip_node[ip], []).append(f"{ip}:{port}")
        results = await asyncio.gather(*(self._portcheck(n, t) for n, t in by_node.items()))
        return [r for rs in results for r in rs]

    async def _reap(self, holders: list[portcheck.Holder]) -> None:
        by_node: dict[str, list[str]] = {}
        for h in holders:
            ip = h.address.rpartition(":")[0]
            node = self._ip_node.get(ip) or next(iter(self._ip_node.values()))
            if h.pid is not None and h.start_ticks is not None:
                by_node.setdefault(node, []).extend(["--reap", f"{h.pid}:{h.start_ticks}"])
        await asyncio.gather(*(self._portcheck(n, args) for n, args in by_node.items()))

    def _stale(self, h: portcheck.Holder) -> bool:
        """An srt process of a Slurm job that is over (never one of a live job, ours included)."""
        if not h.cookie:
            return False
        if h.slurm_job_id:
            from srt_services.launch.slurm.control import ACTIVE, job_state

            return h.slurm_job_id != self.job_id and job_state(h.slurm_job_id) not in ACTIVE
        return is_stale_local(h)

    async def sees_job_dir(self, node: str) -> bool:
        known = self._shared.get(node)
        if known is not None:
            return known
        marker = os.path.join(self.job_dir, f".srt-shared-{os.getpid()}")
        with open(marker, "w", encoding="utf-8") as fh:
            fh.write(node)
        try:
            if self.agents is not None and self.agents.available(node):
                try:
                    seen = bool(await self.agents.call(node, "exists", {"path": marker}, 60.0))
                except AgentError:
                    seen = False
            else:
                argv = self._helper(node, "srt-shared-fs", "test", "-f", marker)
                result = await run_command(
                    self.children, argv, 60.0, env=self._env(process.service_env({}, {}))
                )
                seen = result.code == 0
        finally:
            os.unlink(marker)
        self._shared[node] = seen
        return seen

    async def finish(self) -> None:
        """Remove the job's node-local tree on every node that holds one (one bounded
        ``rm`` step per node, all at once); Slurm cannot do it for a directory it did not
        make. Once the job itself is cancelled no step can start any more: the ``rm`` then
        fails at once, and a ``$SLURM_TMPDIR`` root is removed by Slurm anyway."""
        root = self.plan.local_dir
        nodes = self.plan.local_dir_nodes()
        if self.agents is not None:
            # each agent's last sweep: nothing of the job left on its node, its node-local
            # tree removed; a node whose agent is gone gets the usual rm step
            self._unkillable = await self.agents.finish(KILL_WAIT)
            served = {n for n in self.agents.links if n not in self.agents.lost_nodes()}
            nodes = [n for n in nodes if n not in served]
        if not root or not nodes:
            return
        if not own_tree(root, self.job_id):  # never rm -rf anything but our own tree
            raise SlurmError(f"refusing to remove {root!r}: not this job's node-local directory")
        results = await asyncio.gather(*(self._remove_local(node, root) for node in nodes))
        failed = [f"{node}: {why}" for node, why in zip(nodes, results, strict=True) if why]
        if failed:
            raise SlurmError(f"could not remove {root} on " + "; ".join(failed))

    def unkillable(self) -> list[str]:
        return list(self._unkillable)

    def close(self) -> None:
        if self.agents is not None:
            self.agents.close()

    def _helper(self, node: str, name: str, *argv: str) -> list[str]:
        """A short step of srt's own on ``node`` (a port check, a marker test, a cleanup)."""
        return [*commands.step_argv(self.job_id, node, name), "--export=ALL", *argv]

    async def _remove_local(self, node: str, root: str) -> str | None:
        """``rm -rf`` of ``root`` on ``node``; what went wrong, or ``None``."""
        argv = self._helper(node, "srt-cleanup", "rm", "-rf", "--", root)
        result = await run_command(
            self.children, argv, CLEANUP_TIMEOUT, env=self._env(process.service_env({}, {}))
        )
        if result.timed_out:
            return f"no answer within {CLEANUP_TIMEOUT:g}s"
        return None if result.ok else (result.stderr.strip()[-200:] or f"exit {result.code}")

    def stop_budget(self, wanted: float) -> float:
        per_tier = max(0.5, (self.kill_wait_s - KILLWAIT_MARGIN) / TIERS)
        return min(wanted, per_tier)

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
        if container is None and self.agents is not None and self.agents.available(node):
            return await self.agents.oneshot(node, argv, log_path, env, timeout, cwd)
        name = f"srt-oneshot-{os.path.basename(log_path).removesuffix('.out')}"
        flags = commands.container_flags(container, self.aliases, self.mounts, self.job_dir)
        full = commands.oneshot_argv(argv, self.job_id, node, name, log_path, cwd, flags)
        result = await run_command(
            self.children, full, timeout, env=self._env(env), stdout_path=log_path
        )
        if result.timed_out:
            with contextlib.suppress(Exception):
                ids = await self._step_ids({name})
                if ids:
                    await run_command(
                        self.children,
                        ["scancel", "--signal=KILL", *ids.values()],
                        30.0,
                        env=slurm_env(),
                    )
        return result


def _agent_env() -> dict[str, str]:
    src = os.environ
    return {**slurm_env(), **{k: src[k] for k in AGENT_ENV if k in src}}


def _followed(instance: PlannedInstance, log_path: str) -> list[tuple[str, float | None]]:
    """The files the instance's probes follow (a log probe without a ``path`` follows the
    instance's own log), each with how long it matters: a readiness probe's until its
    timeout, a liveness probe's while the instance runs."""
    out: list[tuple[str, float | None]] = []
    for probe, seconds in ((instance.readiness, True), (instance.liveness, False)):
        path = _probe_path(probe, log_path)
        if probe is not None and path is not None:
            out.append((path, probe.timeout if seconds else None))
    return out


def _probe_path(probe: PlannedProbe | None, log_path: str) -> str | None:
    if probe is None:
        return None
    path = probe.config.get("path")
    if isinstance(path, str) and path:
        return path
    return log_path if probe.probe == "log" else None


def subprocess_text(argv: list[str]) -> str:
    """A short command's standard output ('' when it cannot run)."""
    import subprocess

    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
