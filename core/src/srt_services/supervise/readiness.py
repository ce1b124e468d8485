"""Waiting for an instance to be ready, and watching that it stays alive.

A readiness wait races the probe against the instance's exit and the probe's timeout: the
instance is ready when the probe passes first; an exit first fails the phase with the
log's last lines; a timeout stops the instance and fails the phase with the probe's last
error. A liveness watch checks every ``period`` and stops the instance after
``failure_threshold`` failures in a row (its exit then takes the ordinary path).

The orchestrator hands :class:`Probing` what it needs and decides what a result means.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from srt_services.contracts.plan import PlannedProbe
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.layout import JobDir
from srt_services.launch import process
from srt_services.supervise.portpoll import PortPoller
from srt_services.supervise.probing import InotifyHub, Target, probe_starts
from srt_services.supervise.runs import Emit, InstanceRun, PhaseFailed, UnitRun, describe_code

if TYPE_CHECKING:
    from collections.abc import Mapping

    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.probe import Probe

#: Log lines quoted when an instance exits before it is ready.
LOG_TAIL_LINES = 20
TCP_ATTEMPT_TIMEOUT = 1.0
HTTP_ATTEMPT_TIMEOUT = 5.0
#: How long a cancelled probe may take to finish: a probe must not hold up the orchestrator.
PROBE_CANCEL_WAIT = 1.0


@dataclass(slots=True)
class Probing:
    """Runs an instance's readiness and liveness probes."""

    #: every probe the plan names, by name (looked up once, when the job was set up)
    probes: Mapping[str, Probe]
    job: JobDir
    launcher: Launcher
    emit: Emit
    hub: InotifyHub | None
    poller: PortPoller | None
    #: how to stop an instance that failed a probe (SIGTERM, grace, SIGKILL); without
    #: it, SIGKILL at once
    stop: Callable[[InstanceRun, str], Awaitable[None]] | None = None

    async def _stop(self, inst: InstanceRun, reason: str) -> None:
        if self.stop is not None:
            await self.stop(inst, reason)
        elif inst.handle is not None:
            await self.launcher.kill([inst.handle])

    @staticmethod
    def launching(inst: InstanceRun) -> None:
        """Called right before each attempt of ``inst`` is launched: note where the files
        its probes follow stand, so only what this attempt writes can make it ready."""
        p = inst.planned
        fleet = inst.unit.planned.fleet
        if p.readiness is None and p.liveness is None and fleet is None:
            inst.probe_starts = {}  # most instances: nothing to look at
            return
        inst.probe_starts = probe_starts((p.readiness, p.liveness, fleet))

    def target(self, inst: InstanceRun, probe: PlannedProbe) -> Target:
        """What the probe of ``inst``'s current attempt looks at."""
        h = inst.handle
        return Target(
            config=probe.config,
            log_path=h.log_path if h else self.job.inside(inst.planned.log),
            log_offset=h.log_offset if h else 0,
            job_dir=self.job.path,
            started_wall=h.started_wall if h else time.time(),
            interval=probe.interval,
            hub=self.hub,
            owner_check=self._owner_check(inst),
            poller=self.poller,
            starts=inst.probe_starts,
        )

    def _owner_check(self, inst: InstanceRun) -> Callable[[int], bool | None]:
        def check(port: int) -> bool | None:
            if inst.handle is None:
                return None
            return self.launcher.owns_listener(inst.handle, port)

        return check

    async def wait_ready(self, inst: InstanceRun) -> None:
        """Return once the current attempt is ready; raise PhaseFailed if it exits first or
        is not ready in time."""
        spec = inst.planned.readiness
        assert spec is not None
        assert inst.exit_fut is not None
        p = inst.planned
        exit_fut: asyncio.Future[Any] = inst.exit_fut
        if exit_fut.done():
            raise self._exited_before_ready(inst, exit_fut.result(), spec)
        probe = self.probes[spec.probe]
        target = self.target(inst, spec)
        attempt_timeout = HTTP_ATTEMPT_TIMEOUT if spec.probe == "http" else TCP_ATTEMPT_TIMEOUT
        waiter = asyncio.ensure_future(probe.wait_ready(target, min(attempt_timeout, spec.timeout)))
        self.emit("waiting", step=p.step, unit=p.unit, node=p.node, probe=spec.describe)
        try:
            done, _ = await asyncio.wait(
                {waiter, exit_fut}, timeout=spec.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not waiter.done():
                waiter.cancel()
                await asyncio.wait({waiter}, timeout=PROBE_CANCEL_WAIT)
        if waiter in done and waiter.exception() is None and not exit_fut.done():
            return
        if exit_fut.done():
            raise self._exited_before_ready(inst, exit_fut.result(), spec)
        if waiter in done and waiter.exception() is not None:
            err = waiter.exception()
            target.last_error = f"probe error: {type(err).__name__}: {err}"
        raise await self._not_ready_in_time(inst, spec, target.last_error)

    async def _not_ready_in_time(
        self, inst: InstanceRun, spec: PlannedProbe, last_error: str
    ) -> PhaseFailed:
        """Stop the instance now (the job is failing anyway) and say why it failed."""
        p = inst.planned
        inst.killed_for = "readiness timeout"
        await self._stop(inst, "readiness timeout")
        inst.state = "failed"
        last = f"; last probe error: {last_error}" if last_error else ""
        message = (
            f"{inst.label} on {p.node} was not ready within {spec.timeout:g}s"
            f" ({spec.describe}){last}; see {self.job.inside(p.log)}"
        )
        self.emit("ready_timeout", step=p.step, unit=p.unit, node=p.node, error=last_error)
        return PhaseFailed(
            StopCause(
                StopKind.READINESS_TIMEOUT,
                message,
                unit=p.unit,
                step=p.step,
                node=p.node,
                timeout=spec.timeout,
            )
        )

    async def wait_fleet(self, unit: UnitRun) -> None:
        """Return once the unit's fleet probe passes (every instance is ready already).

        The kind's whole-service gate (a Ray head listing every member ALIVE) races every
        instance's exit: a member that dies while the cluster forms fails the phase at once
        with its log tail, and a fleet that does not form in time fails it with the probe's
        last word (which members are missing).
        """
        spec = unit.planned.fleet
        assert spec is not None
        u = unit.planned
        exits = {i.exit_fut: i for i in unit.instances if i.exit_fut is not None}
        for fut, inst in exits.items():
            if fut.done():
                raise self._exited_before_ready(inst, fut.result(), spec)
        probe = self.probes[spec.probe]
        first = unit.instances[0]
        target = self.target(first, spec)
        target.owner_check = lambda port: None  # the fleet answers for many processes
        attempt_timeout = spec.attempt_timeout or HTTP_ATTEMPT_TIMEOUT
        waiter = asyncio.ensure_future(probe.wait_ready(target, min(attempt_timeout, spec.timeout)))
        self.emit("fleet_waiting", unit=u.name, probe=spec.describe)
        started = time.monotonic()
        racing: set[asyncio.Future[Any]] = {waiter, *exits}
        try:
            done, _ = await asyncio.wait(
                racing, timeout=spec.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not waiter.done():
                waiter.cancel()
                await asyncio.wait({waiter}, timeout=PROBE_CANCEL_WAIT)
        for fut, inst in exits.items():
            if fut.done():
                raise self._exited_before_ready(inst, fut.result(), spec)
        if waiter in done and waiter.exception() is None:
            self.emit("fleet_ready", unit=u.name, waited=round(time.monotonic() - started, 6))
            return
        if waiter in done and waiter.exception() is not None:
            err = waiter.exception()
            target.last_error = f"probe error: {type(err).__name__}: {err}"
        raise await self._fleet_not_ready(unit, spec, target.last_error)

    async def _fleet_not_ready(
        self, unit: UnitRun, spec: PlannedProbe, last_error: str
    ) -> PhaseFailed:
        u = unit.planned
        running = [i for i in unit.instances if i.running]
        for inst in running:
            inst.state = "failed"
            inst.killed_for = "fleet readiness timeout"
        await self.launcher.kill([i.handle for i in running if i.handle is not None])
        last = f"; {last_error}" if last_error else ""
        message = (
            f"{u.label} did not form within {spec.timeout:g}s ({spec.describe}){last};"
            f" see the logs of {', '.join(self.job.inside(i.planned.log) for i in unit.instances)}"
        )
        self.emit("ready_timeout", unit=u.name, error=last_error, fleet=True)
        return PhaseFailed(
            StopCause(StopKind.READINESS_TIMEOUT, message, unit=u.name, timeout=spec.timeout)
        )

    def _exited_before_ready(self, inst: InstanceRun, code: int, spec: PlannedProbe) -> PhaseFailed:
        p = inst.planned
        if inst.unavailable is None:  # an unavailable one keeps its state (see await_ready)
            inst.state = "failed"
        log = self.job.inside(p.log)
        lines = process.tail(log, LOG_TAIL_LINES)
        shown = "\n".join(f"    {line}" for line in lines) if lines else "    (the log is empty)"
        reason = inst.handle.exit_reason if inst.handle is not None else None
        why = f"; {reason}" if reason else ""
        message = (
            f"{inst.label} on {p.node} exited before it was ready ({describe_code(code)};"
            f" probe {spec.describe}{why}). Last {len(lines)} log lines of {log}:\n{shown}"
        )
        return PhaseFailed(
            StopCause.process_exit(
                StopKind.EXITED_BEFORE_READY,
                code,
                message,
                unit=p.unit,
                step=p.step,
                node=p.node,
                reason=reason,
            )
        )

    async def watch_liveness(self, inst: InstanceRun, spec: PlannedProbe) -> None:
        """Check ``inst`` every period while it runs; stop it after too many failures."""
        probe = self.probes[spec.probe]
        target = self.target(inst, spec)
        period = spec.period or 10.0
        threshold = spec.failure_threshold or 3
        attempt_timeout = spec.attempt_timeout or 1.0
        failures = 0
        while True:
            await asyncio.sleep(period)
            if not inst.running:
                return
            result = await probe.check(target, attempt_timeout)
            if result.ok:
                if failures:
                    self.emit("liveness_recovered", step=inst.step, after=failures)
                failures = 0
                continue
            failures += 1
            self.emit("liveness_failed", step=inst.step, count=failures, error=result.detail)
            if failures >= threshold:
                inst.killed_for = f"liveness failed {failures} times: {result.detail}"
                await self._stop(inst, "liveness failed")
                return


@dataclass(slots=True)
class ReadinessGate:
    """When an instance and a unit count as ready, and what follows: the ``ready`` event,
    the state written, the liveness watch started."""

    probing: Probing
    emit: Emit
    mark_dirty: Callable[[], None]
    #: starts a background task the orchestrator tracks (a liveness watch)
    spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]]

    async def unit_ready(self, unit: UnitRun) -> None:
        """Wait until every instance with readiness is ready; the first failure raises."""
        gated = [i for i in unit.instances if i.planned.readiness is not None]
        if gated:
            results = await asyncio.gather(
                *(self.await_ready(i) for i in gated), return_exceptions=True
            )
            for r in results:
                if isinstance(r, BaseException):
                    raise r
        for inst in unit.instances:
            if inst.planned.readiness is None and inst.state == "starting":
                self.mark_ready(inst)
        if unit.planned.fleet is not None:
            await self.probing.wait_fleet(unit)

    async def await_ready(self, inst: InstanceRun) -> None:
        """Wait for readiness of the current attempt (PhaseFailed if it fails), then mark it.

        An instance found ``unavailable`` on its node (see :mod:`.exits`) ends the wait
        without failing the phase: the job runs without it."""
        try:
            await self.probing.wait_ready(inst)
        except PhaseFailed:
            if inst.unavailable is not None:
                return
            raise
        self.mark_ready(inst)

    def mark_ready(self, inst: InstanceRun) -> None:
        inst.state = "ready"
        inst.ready_at = time.monotonic()
        p = inst.planned
        waited = inst.ready_at - (inst.waiting_since or inst.ready_at)
        self.emit(
            "ready",
            step=p.step,
            unit=p.unit,
            node=p.node,
            waited=round(waited, 6),
            attempt=inst.attempt,
        )
        self.mark_dirty()
        if p.liveness is not None:
            inst.liveness = self.spawn(self.probing.watch_liveness(inst, p.liveness))
