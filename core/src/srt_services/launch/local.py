"""The ``local`` launcher: every instance a process group of its own on this machine.

Virtual nodes are loopback addresses (node *i* is 127.0.0.(i+1)); they change nothing
about how a process starts, only what ``{node_ip}`` renders to. A stop signals the whole
process group, then whatever escaped it (a ``setsid`` daemon) is found among the
orchestrator's re-parented children by its ``SRT_INSTANCE`` cookie.
"""

from __future__ import annotations

import shutil
import signal
import time
from typing import ClassVar

from srt_services.extend.launcher import Launcher, Preflight
from srt_services.launch import portcheck, process
from srt_services.launch.children import CommandResult, run_command
from srt_services.launch.handle import Handle
from srt_services.launch.leftovers import is_stale_local, settle_ports
from srt_services.plan.model import PlannedInstance


class LocalLauncher(Launcher):
    name: ClassVar[str] = "local"
    summary: ClassVar[str] = "Processes on this machine; virtual nodes on 127.0.0.x."
    #: images, CPU binding and srun options are srun's; here a process is just a process
    applies: ClassVar[frozenset[str]] = frozenset()

    def launch(self, instance: PlannedInstance, env: dict[str, str], log_path: str) -> Handle:
        argv = process.wrap_preamble(instance.argv, instance.preamble, f"srt:{instance.step}")
        cwd = instance.cwd
        started_wall = time.time()
        spawned = process.spawn(argv, env, log_path, cwd=cwd, read_ticks=False)
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
        """Our children that are not instances: escaped daemons re-parented to us.

        As a child subreaper we only ever have children the job started (directly or by
        descent), so one without a cookie is still the job's (a program that scrubbed its
        environment, or one started through a protocol that passes no environment); it gets
        no step and is stopped by the final sweep. Only another job's cookie is left alone.
        """
        out: dict[int, str | None] = {}
        watched = self.watcher.watched_pids() if self.watcher is not None else set()
        for pid in process.my_children():
            if pid in watched or not process.alive(pid):
                continue
            got, step = process.cookie_of(pid)
            if got is None or got == cookie:
                out[pid] = step if got == cookie else None
        return out

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
        return await run_command(
            self.watcher, argv, timeout, env=env, cwd=cwd, stdout_path=log_path
        )
