"""Restarting or stopping one service of a running job, on request (``srt restart``,
``srt stop JOBDIR SERVICE``).

A restart uses the paths the job already has: the stop is the one a readiness timeout uses
(:func:`~srt_services.supervise.shutdown.stop_instances`: the unit's stop signal to every
process group, its grace, then SIGKILL), followed by the instances' escaped processes, and
the start is the restart policy's (launch, then the unit's readiness probe, handed in by
the orchestrator as ``relaunch``). While srt stops an instance on request it is *held*:
its exit is expected, so neither the restart policy nor the rule that a critical unit's
exit ends the job applies to it.

What may be asked is decided here, before anything is touched: the benchmark and terminal
services end the job when they exit, so they are never restarted on their own; a critical
unit's exit ends the job, so restarting (or stopping) one needs ``force``; a unit that has
not finished its first start, or a job that is stopping, is left alone. Refusals say why.

One operation per unit at a time: the unit is reserved in the same step that accepts the
request (:meth:`ServiceOps.prepare`, synchronous on the event loop), so a second request
for it, however close behind, is refused with ``busy`` and told which operation holds it;
requests are not queued (the second one would act on a state its sender did not see).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.jobdir.control import Peer, Reply, Request
from srt_services.launch import process
from srt_services.supervise.runs import Emit, InstanceRun, UnitRun, describe_code
from srt_services.supervise.shutdown import stop_instances

if TYPE_CHECKING:
    from srt_services.contracts.launcher import Launcher

#: Polling step for escaped processes (not our children: no exit event).
STRAY_POLL = 0.02

Note = Callable[[str], None]


@dataclass(slots=True)
class Operation:
    """A request that passed the checks: ``run`` does it."""

    request: Request
    unit: UnitRun
    members: list[InstanceRun]
    by: str

    @property
    def steps(self) -> list[str]:
        return [i.step for i in self.members]


@dataclass
class ServiceOps:
    units: Mapping[str, UnitRun]
    launcher: Launcher
    cookie: str
    emit: Emit
    #: the orchestrator's start path for one instance: launch, readiness, failure handling
    relaunch: Callable[[InstanceRun], Awaitable[None]]
    #: whether the job is being torn down
    stopping: Callable[[], bool]
    #: set by a second signal: skip what is left of a grace
    kill_now: asyncio.Event
    grace_override: float | None = None
    #: unit -> the operation in progress on it ("restart from uid 0 (pid 12)")
    _busy: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ checks

    def prepare(self, request: Request, peer: Peer) -> Operation | Reply:
        """The operation ``request`` asks for, or the refusal that says why not."""
        by = f"uid {peer.uid} (pid {peer.pid})"
        found = self._find(request.unit)
        if isinstance(found, str):
            return self._refuse(request, found)
        unit, members = found
        holder = self._busy.get(unit.name)
        if holder is not None:
            why = (
                f"a {holder} is in progress on {unit.planned.label}: this {request.op} was"
                " refused, not queued; ask again once it is done"
            )
            self.emit("control_refused", op=request.op, unit=request.unit, detail=why)
            return Reply(False, why, refused=True, busy=True)
        refusal = self._refusal(request, unit, members)
        if refusal is not None:
            return self._refuse(request, refusal)
        self._busy[unit.name] = f"{request.op} from {by}"  # released when run() ends
        return Operation(request, unit, members, by)

    def _refuse(self, request: Request, why: str) -> Reply:
        self.emit("control_refused", op=request.op, unit=request.unit, detail=why)
        return Reply(False, why, refused=True)

    def _find(self, name: str) -> tuple[UnitRun, list[InstanceRun]] | str:
        """A unit by name (all its instances) or one instance by its step."""
        unit = self.units.get(name)
        if unit is not None:
            return unit, list(unit.instances)
        for candidate in self.units.values():
            for inst in candidate.instances:
                if inst.step == name:
                    return candidate, [inst]
        names = ", ".join(sorted(self.units))
        return f"this job has no service, role or step named {name!r} (units: {names})"

    def _refusal(self, request: Request, unit: UnitRun, members: list[InstanceRun]) -> str | None:
        u = unit.planned
        op = request.op
        if self.stopping():
            return "the job is stopping"
        if u.external:
            return f"{u.label} is external ({u.external}): srt does not run it"
        if u.category == "benchmark":
            return (
                "the benchmark's exit ends the job, so it is not restarted or stopped on its"
                " own; `srt stop JOBDIR` stops the job"
            )
        if u.terminal:
            return (
                f"{u.label} is terminal: the job ends when its instances have exited, so it is"
                " not restarted or stopped on its own"
            )
        if not members:
            return f"{u.label} has no instances in this job"
        if not unit.started:
            return f"{u.label} has not finished starting yet; ask again once it is ready"
        if u.critical and not request.force:
            if op == "restart":
                return (
                    f"{u.label} is critical: its exit ends the job, so srt restarts it only"
                    " with --force (the job then keeps running while it restarts, and fails"
                    " if it does not come back ready)"
                )
            return (
                f"{u.label} is critical: the job cannot do without it. `srt stop JOBDIR`"
                " stops the whole job; --force stops only it and keeps the rest running"
            )
        return None

    # ------------------------------------------------------------------ doing it

    async def run(self, op: Operation, note: Note) -> Reply:
        """Do an operation :meth:`prepare` accepted (and reserved its unit for)."""
        name = op.unit.name
        try:
            self.emit(
                "control_request",
                op=op.request.op,
                unit=name,
                steps=op.steps,
                by=op.by,
                force=op.request.force or None,
            )
            if op.request.op == "stop":
                reply = await self._stop_op(op, note)
            else:
                reply = await self._restart_op(op, note)
        finally:
            self._busy.pop(name, None)
        # how the request ended, for the record (its answer may have had no listener)
        self.emit("control_done", op=op.request.op, unit=name, ok=reply.ok, detail=reply.text)
        return reply

    async def _stop_op(self, op: Operation, note: Note) -> Reply:
        if all(i.held is not None and not i.running for i in op.members):
            return Reply(True, f"{', '.join(op.steps)} already stopped")
        left = await self.stop(op.members, f"stopped by srt stop from {op.by}", note)
        self.emit("service_stopped", unit=op.unit.name, steps=op.steps, by=op.by)
        if left:
            return Reply(False, "could not stop: " + ", ".join(left))
        return Reply(
            True,
            f"stopped {', '.join(op.steps)}; it stays down until `srt restart` (or the job ends)",
        )

    async def _restart_op(self, op: Operation, note: Note) -> Reply:
        t0 = time.monotonic()
        left = await self.stop(op.members, f"restart requested from {op.by}", note)
        if left:
            return Reply(False, "could not stop: " + ", ".join(left))
        if self.stopping():
            return Reply(False, "the job began stopping; nothing was started again")
        tracker = op.unit.tracker
        if tracker is not None:  # a fresh start: earlier crashes no longer count
            tracker.failures.clear()
            tracker.streak = 0
        for inst in op.members:
            inst.held = None
        gated = [i.step for i in op.members if i.planned.readiness is not None]
        note(
            f"starting {', '.join(op.steps)}"
            + (f"; waiting until ready: {', '.join(gated)}" if gated else "")
        )
        await asyncio.gather(*(self.relaunch(i) for i in op.members))
        took = round(time.monotonic() - t0, 3)
        states = ", ".join(f"{i.step} {i.state}" for i in op.members if i.state != "ready")
        self.emit(
            "restarted",
            unit=op.unit.name,
            steps=op.steps,
            by=op.by,
            seconds=took,
            ok=not states,
            detail=f"not ready: {states}" if states else None,
        )
        if states:
            return Reply(False, f"restarted but not ready: {states} (see `srt logs`)")
        pids = ", ".join(f"{i.step} {_pid(i)}" for i in op.members if i.handle is not None)
        return Reply(True, f"restarted in {took:g}s: {pids}")

    async def stop(self, members: list[InstanceRun], reason: str, note: Note) -> list[str]:
        """Stop ``members`` like any stop (stop signal, grace, SIGKILL; then what escaped
        their process groups) and hold them; return what could not be stopped."""
        for inst in members:
            inst.held = reason
            if inst.liveness is not None:
                inst.liveness.cancel()
                inst.liveness = None
        running = [i for i in members if i.running]
        for inst in members:
            inst.state = "stopping" if inst in running else "stopped"
        grace = self._grace(members)
        if running:
            note(
                "stopping "
                + ", ".join(f"{i.step} ({_pid(i)})" for i in running if i.handle)
                + f": stop signal, SIGKILL after {grace:g}s"
            )
            await stop_instances(running, self.launcher, grace, self.kill_now, self.emit, reason)
            for inst in running:
                if inst.exit_code is not None:
                    note(f"{inst.step} exited ({describe_code(inst.exit_code)})")
        steps = [i.step for i in members]
        await self._stop_strays(set(steps), grace)
        self.launcher.sweep(steps)  # whatever the kernel still counts in these steps
        return [f"{i.step} ({_pid(i)})" for i in running if i.running and i.handle]

    def _grace(self, members: list[InstanceRun]) -> float:
        wanted = self.grace_override
        if wanted is None:
            wanted = members[0].unit.planned.stop_grace
        return self.launcher.stop_budget(wanted)

    async def _stop_strays(self, steps: set[str], grace: float) -> None:
        """Processes of these steps that escaped their group (setsid daemons): the stop
        signal, their grace, then SIGKILL."""
        strays = [p for p, s in self.launcher.stray_processes(self.cookie).items() if s in steps]
        if not strays:
            return
        self.emit("stopping_strays", steps=sorted(steps), pids=strays)
        for pid in strays:
            with contextlib.suppress(OSError):
                if os.getpgid(pid) == pid:
                    process.terminate_group(pid)
            process.signal_pid(pid, signal.SIGTERM)
            process.signal_pid(pid, signal.SIGCONT)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(process.alive(p) for p in strays):
            await asyncio.sleep(STRAY_POLL)
        for pid in strays:
            if process.alive(pid):
                process.signal_pid(pid, signal.SIGKILL)


def _pid(inst: InstanceRun) -> str:
    """``pid N``, or where it runs while its node's agent has not told its PID yet."""
    h = inst.handle
    if h is not None and h.pid:
        return f"pid {h.pid}"
    return f"on {inst.planned.node}, pid not reported yet"
