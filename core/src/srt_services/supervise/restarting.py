"""Restarting a non-critical service after it exited, as its restart policy says, and
starting an instance again on request (``srt restart``).

The policy's decision (restart after a delay, stay down, give up as ``unhealthy``) is
:mod:`.restart`'s, a pure tracker; this module carries it out: it waits the delay, and
launches again unless the instance was restarted or stopped on request meanwhile. A
restarted instance goes through its readiness probe again; failing it is an exit like
any other, or, for a critical unit restarted with ``--force``, the job's end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

from srt_services.supervise.restart import Action
from srt_services.supervise.runs import InstanceRun, JobRun, PhaseFailed, RequestStop

if TYPE_CHECKING:
    from srt_services.supervise.journal import Journal
    from srt_services.supervise.readiness import ReadinessGate


class Restarts:
    def __init__(
        self,
        run: JobRun,
        journal: Journal,
        launch: Callable[[InstanceRun], bool],
        gate: ReadinessGate,
        request_stop: RequestStop,
        stop_instance: Callable[[InstanceRun, str], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
    ) -> None:
        self.run = run
        self.journal = journal
        self.launch = launch
        self.gate = gate
        self.request_stop = request_stop
        self.stop_instance = stop_instance
        self.spawn = spawn

    def after_exit(self, inst: InstanceRun, code: int) -> None:
        """A non-critical service exited after it was ready: its policy decides."""
        unit = inst.unit
        p = inst.planned
        if unit.tracker is None:
            return
        ran_for = time.monotonic() - (inst.handle.started_mono if inst.handle else time.monotonic())
        decision = unit.tracker.on_exit(code, ran_for)
        emit = self.journal.emit
        if decision.action is Action.GIVE_UP:
            inst.state = "unhealthy"
            emit("unhealthy", step=p.step, unit=p.unit, node=p.node, detail=decision.reason)
            return
        if decision.action is not Action.RESTART:
            return
        inst.state = "backoff"
        emit(
            "restarting",
            step=p.step,
            unit=p.unit,
            node=p.node,
            delay=round(decision.delay, 6),
            attempt=inst.attempt + 1,
        )
        self.spawn(self._restart_later(inst, decision.delay, inst.attempt))

    async def _restart_later(self, inst: InstanceRun, delay: float, attempt: int) -> None:
        await asyncio.sleep(delay)
        # not if it was restarted or stopped on request meanwhile (srt restart / srt stop)
        if inst.attempt == attempt and inst.state == "backoff":
            await self.relaunch(inst)

    async def relaunch(self, inst: InstanceRun) -> None:
        """Start an instance again (restart policy, ``srt restart``): launch, readiness; a
        failed readiness is an exit, or for a critical unit (a forced restart) the job's end."""
        if self.run.stopping or not self.launch(inst):
            return  # refused (and recorded): the job is stopping, or an attempt still runs
        inst.restarts += 1
        if inst.planned.readiness is None:
            self.gate.mark_ready(inst)
            return
        try:
            await self.gate.await_ready(inst)
        except PhaseFailed as exc:
            if inst.held is not None or self.run.stopping:
                return  # stopped on request (or by the teardown) while it was starting
            if inst.unit.planned.critical:
                self.request_stop(exc.cause, 1)
                return
            self.journal.emit(
                "restart_failed",
                step=inst.step,
                unit=inst.planned.unit,
                detail=str(exc).splitlines()[0],
            )
            if inst.running:
                await self.stop_instance(inst, "restart failed")
            if inst.exit_fut is not None:
                code = await inst.exit_fut
                if not self.run.stopping:
                    self.after_exit(inst, code)
