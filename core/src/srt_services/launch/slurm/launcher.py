"""The ``slurm`` launcher (used by the orchestrator inside the allocation ``srt apply`` made).

Each instance is a named step: ``srun --overlap --nodes=1 --ntasks=1 --nodelist=<node>
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
import os
import signal
import sys
import time
from typing import Any, ClassVar

from srt_services.contracts.allocation import Allocation, AllocationRequest
from srt_services.contracts.handle import CommandResult, Handle
from srt_services.contracts.launcher import Launcher, LaunchSettings, Preflight
from srt_services.contracts.plan import PlannedInstance
from srt_services.launch import portcheck, process
from srt_services.launch.children import run_command
from srt_services.launch.leftovers import is_stale_local, settle_ports
from srt_services.launch.slurm import commands
from srt_services.launch.slurm.allocation import (
    SlurmError,
    current_allocation,
    kill_wait,
    slurm_env,
)

#: Seconds kept free below KillWait for the final sweep and writing the result.
KILLWAIT_MARGIN = 1.5
#: Shutdown tiers that may each need a grace.
TIERS = 3
STEP_LOOKUP_TRIES = 10
#: Seconds the removal of the node-local tree may take on one node (all nodes at once).
CLEANUP_TIMEOUT = 15.0
PORTCHECK = "srt_services.launch.portcheck"


def own_tree(root: str, job_id: str) -> bool:
    """Whether ``root`` is job ``job_id``'s node-local tree, ``<root>/srt-<job id>`` as
    ``JobPaths.local_job_dir`` names it for a Slurm job: the clean-up step removes nothing
    whose name does not say it belongs to this job."""
    return "/" in root and os.path.basename(root) == f"srt-{job_id}"


class SlurmLauncher(Launcher):
    name: ClassVar[str] = "slurm"
    summary: ClassVar[str] = "One named `srun --overlap` step per instance inside the allocation."
    local_processes: ClassVar[bool] = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kill_wait_s = 30.0
        self.aliases: dict[str, str] = {}
        self.mounts: list[str] = []
        self.extra: list[str] = []
        self._ip_node: dict[str, str] = {}
        self._shared: dict[str, bool] = {}

    @classmethod
    def allocation(
        cls, request: AllocationRequest, needed: int, settings: LaunchSettings | None = None
    ) -> Allocation:
        interface = settings.network_interface if settings is not None else None
        alloc = current_allocation(request.job_dir or os.getcwd(), interface)
        if len(alloc.nodes) < needed:
            raise SlurmError(
                f"the allocation has {len(alloc.nodes)} node(s) but the recipe needs {needed}"
            )
        return alloc

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

    def _env(self, env: dict[str, str]) -> dict[str, str]:
        out = dict(env)
        out.update({k: v for k, v in slurm_env().items() if k == "SLURM_CONF"})
        return out

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
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

    async def terminate(self, handles: list[Handle]) -> None:
        await self._signal(handles, "TERM")

    async def kill(self, handles: list[Handle]) -> None:
        await self._signal(handles, "KILL")
        await asyncio.sleep(0.5)
        for h in handles:
            if h.returncode is None:
                process.signal_pid(h.pid, signal.SIGKILL)

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
            argv = self._helper(node, "srt-shared-fs", "test", "-f", marker)
            result = await run_command(
                self.children, argv, 60.0, env=self._env(process.service_env({}, {}))
            )
        finally:
            os.unlink(marker)
        self._shared[node] = result.code == 0
        return self._shared[node]

    async def finish(self) -> None:
        """Remove the job's node-local tree on every node that holds one (one bounded
        ``rm`` step per node, all at once); Slurm cannot do it for a directory it did not
        make. Once the job itself is cancelled no step can start any more: the ``rm`` then
        fails at once, and a ``$SLURM_TMPDIR`` root is removed by Slurm anyway."""
        root = self.plan.local_dir
        nodes = self.plan.local_dir_nodes()
        if not root or not nodes:
            return
        if not own_tree(root, self.job_id):  # never rm -rf anything but our own tree
            raise SlurmError(f"refusing to remove {root!r}: not this job's node-local directory")
        results = await asyncio.gather(*(self._remove_local(node, root) for node in nodes))
        failed = [f"{node}: {why}" for node, why in zip(nodes, results, strict=True) if why]
        if failed:
            raise SlurmError(f"could not remove {root} on " + "; ".join(failed))

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
