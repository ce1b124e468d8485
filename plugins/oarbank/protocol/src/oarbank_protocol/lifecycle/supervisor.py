"""One service's lifecycle on one node: the state machine behind the module manager.

This module holds the machine only: the states and the moves between them, and the one task
that acts. Everything it consults or does to the service is a collaborator in a module of
its own:

* who wants the service (attempts, the idle timer, yields) is :mod:`.demand`;
* starting waits for ``ready`` (:mod:`.readiness`); a ready service is watched with
  ``status`` (:mod:`.liveness`);
* a failure becomes a backoff or ``unhealthy`` (:mod:`.restart`, on :mod:`.backoff`);
* fingerprints give health, pool tokens and memory reservations (:mod:`.fingerprints`,
  :mod:`.service_resources`); after an agent restart they decide adoption (:mod:`.adoption`);
* stopping is checked and escalated (:mod:`.stopping`);
* owned objects are reaped and checked at teardown (:mod:`.owned_objects`);
* the service's entry in the state file (:mod:`.service_record`).

Threading model: everything runs on one asyncio event loop and nothing here is thread-safe.
Each supervisor owns a single *reconcile loop* task; only that task starts and stops the
service (shutdown aside, which first cancels the loop). Admissions and releases just change
the user set and wake the loop, so two attempts admitted at the same time cause exactly one
``start`` and a refcount of two. A per-service lock serialises the operations that change
what exists (start, stop, reaping), so the reaper never runs while the service starts
(CNI GC exclusivity).

States::

    stopped ─start→ starting ─ready→ ready ─idle/yield/shutdown→ stopping → stopped
        ↑               │ fail            │ exited unexpectedly
        └── backoff ←───┴─────────────────┘      (max_failures in window → unhealthy)

``unhealthy`` (restart budget spent, a non-retryable error, or a failed stop with leftovers)
and ``failed`` (a manual service that stopped) withdraw the service's capabilities until a
fingerprint shows recovery (non-healthy → healthy) or an operator calls :meth:`reset`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

from oarbank_protocol.documents import Fingerprint, Health, OpResult
from oarbank_protocol.errors import (
    AdmissionTimeout,
    CapabilityUnavailable,
    ExecError,
    ServiceStartFailed,
)
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.execution.process_identity import pid_ticks
from oarbank_protocol.lifecycle import adoption, service_record
from oarbank_protocol.lifecycle.adoption import Adoption
from oarbank_protocol.lifecycle.clock import Clock, wait_event
from oarbank_protocol.lifecycle.demand import Demand
from oarbank_protocol.lifecycle.events import EventLog, ManagerEvent
from oarbank_protocol.lifecycle.fingerprints import Doubling, ServiceHealth, keep_fingerprinting
from oarbank_protocol.lifecycle.liveness import StatusWatch
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.lifecycle.owned_objects import ClearReport, OwnedObjects
from oarbank_protocol.lifecycle.readiness import ReadinessGate
from oarbank_protocol.lifecycle.reaper import Liveness, ReapReport
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.restart import RestartBudget
from oarbank_protocol.lifecycle.service_resources import ServiceResources
from oarbank_protocol.lifecycle.states import WITHDRAWN_STATES, ServiceSnapshot, ServiceState
from oarbank_protocol.lifecycle.stopping import StopEscalation, StopOutcome
from oarbank_protocol.manifest import ServiceSpec

log = logging.getLogger(__name__)

# The supervisor's vocabulary, importable from here as before the collaborators had modules.
__all__ = [
    "WITHDRAWN_STATES",
    "ClearReport",
    "ServiceSnapshot",
    "ServiceState",
    "ServiceSupervisor",
    "StopOutcome",
    "SupervisorOptions",
]


class ServiceSupervisor:
    """One service's state machine (see the module docstring)."""

    def __init__(
        self,
        spec: ServiceSpec,
        ops: ServiceOps,
        *,
        node_id: str,
        clock: Clock,
        resources: NodeResources,
        events: EventLog,
        options: SupervisorOptions | None = None,
        rng: random.Random | None = None,
        liveness: Liveness | None = None,
        persist: Callable[[], None] | None = None,
        supported: bool = True,
    ) -> None:
        self.spec = spec
        self.ops = ops
        self.node_id = node_id
        self.clock = clock
        self.events = events
        self.options = options = options or SupervisorOptions()
        self._persist_cb = persist
        self.supported = supported
        self.state = ServiceState.STOPPED if supported else ServiceState.UNSUPPORTED
        self.reason = "" if supported else "not supported on this platform"
        self.backoff_until: float | None = None
        self.restart_count = 0
        self.start_attempts = 0
        self.pid: int | None = None
        self.pid_start_ticks: int | None = None
        self.adopted = False
        self.leftover_ids: list[str] = []
        self.last_stop: StopOutcome | None = None
        self.recovered = False
        self._pending_record: dict[str, Any] | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._fp_trigger = asyncio.Event()
        self._closing = False
        self._ready_deadline: float | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: A ``start`` op still running when shutdown cancelled the loop: shutdown lets it
        #: finish (its own timeout bounds it) before ``stop``, because killing a start
        #: half-way can leave what it already launched unrecorded by the module.
        self._inflight_start: asyncio.Future[OpResult] | None = None
        # The collaborators, one per thing done to the service.
        self.demand = Demand(spec, clock)
        self.restarts = RestartBudget(spec.restart, clock.monotonic, rng)
        self.resources = ServiceResources(spec, resources)
        self.health_view = ServiceHealth(spec.name, ops, spec.pools)
        self.readiness = ReadinessGate(
            spec,
            ops,
            clock=clock,
            not_running_grace=options.ready_not_running_grace,
            emit=self._emit,
        )
        self.status_watch = StatusWatch(
            spec, ops, clock=clock, failure_threshold=options.status_failure_threshold
        )
        self.stopper = StopEscalation(
            spec.name, ops, node_id=node_id, options=options, emit=self._emit
        )
        self.owned = OwnedObjects(
            spec.name,
            ops,
            node_id=node_id,
            options=options,
            liveness=liveness,
            lock=self._lock,
            live_here=lambda: self.demand.users,
            emit=self._emit,
        )
        self._recovery_retry = Doubling(
            options.refingerprint_initial_s, options.refingerprint_max_s
        )

    # ------------------------------------------------------------------ public API

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def lifecycle(self) -> str:
        return self.spec.lifecycle

    @property
    def users(self) -> dict[str, float]:
        """The attempts using the service now (its reference count)."""
        return self.demand.users

    @property
    def yield_requested(self) -> bool:
        return self.demand.yield_requested

    @property
    def memory_holder(self) -> str:
        return self.resources.holder

    @property
    def fingerprint(self) -> Fingerprint | None:
        return self.health_view.fingerprint

    @property
    def health(self) -> str:
        return self.health_view.health

    @property
    def health_ok(self) -> bool | None:
        return self.health_view.ok

    @property
    def health_detail(self) -> str:
        return self.health_view.detail

    @property
    def last_reap(self) -> ReapReport | None:
        return self.owned.last_reap

    def availability(self) -> tuple[bool, str]:
        """Whether admissions needing this service may proceed, and if not, why."""
        if self.state in WITHDRAWN_STATES:
            return False, f"service is {self.state}: {self.reason}"
        if self.health_ok is not True:
            return False, f"fingerprint {self.health}: {self.health_detail}"
        if self.lifecycle == "manual" and self.state != ServiceState.READY:
            return False, "manual service is not running (the agent never starts it)"
        return True, ""

    def reserve_needed_gb(self) -> float:
        """Memory this service would add to the node's charges if it started now."""
        return self.resources.needed_gb(self.fingerprint)

    def precharge(self) -> None:
        """Book this service's reservation before it starts (admission already checked it)."""
        self.resources.precharge(self.fingerprint)

    async def acquire(self, attempt_id: str, *, timeout_s: float | None = None) -> None:
        """Add a user and wait until the service is ready (starting it if needed)."""
        ok, why = self.availability()
        if not ok:
            raise CapabilityUnavailable(self.name, why)
        added = self.demand.add(attempt_id)
        self._persist()
        self._wake.set()
        try:
            await self.wait_ready(timeout_s=timeout_s)
        except BaseException:
            if added:
                self.release(attempt_id)
            raise

    def release(self, attempt_id: str) -> bool:
        """Drop a user; a second release of the same attempt is a no-op (never negative)."""
        if not self.demand.remove(attempt_id):
            return False
        self._persist()
        self._wake.set()
        return True

    async def wait_ready(self, *, timeout_s: float | None = None) -> None:
        deadline = None if timeout_s is None else self.clock.monotonic() + timeout_s
        while True:
            if self.state == ServiceState.READY:
                return
            if self.state in WITHDRAWN_STATES:
                raise ServiceStartFailed(self.name, f"{self.state}: {self.reason}", retryable=False)
            if self.lifecycle == "manual":
                raise CapabilityUnavailable(self.name, "manual service is not running")
            changed = self._changed
            remaining = None if deadline is None else deadline - self.clock.monotonic()
            if remaining is not None and remaining <= 0:
                raise AdmissionTimeout(
                    f"service {self.name!r} not ready within {timeout_s:g} s "
                    f"(state {self.state}: {self.reason})"
                )
            await wait_event(changed, self.clock, remaining)

    def reset(self) -> bool:
        """Operator action: clear ``unhealthy``/``failed`` and the failure history."""
        if self.state not in (ServiceState.UNHEALTHY, ServiceState.FAILED):
            return False
        self.restarts.reset()
        self.leftover_ids = []
        self._set(ServiceState.STOPPED, "reset by operator", kind="reset")
        self._fp_trigger.set()
        return True

    def _may_yield(self) -> bool:
        return self.demand.may_yield(ready=self.state == ServiceState.READY)

    def yieldable_gb(self) -> float:
        """The memory a yield would free now (0 when this service may not yield)."""
        return self.resources.charged() if self._may_yield() else 0.0

    def request_yield(self) -> float:
        """Ask the loop to stop this idle service for memory; returns the GB it will free."""
        if not self._may_yield():
            return 0.0
        self.demand.yield_requested = True
        self._wake.set()
        return self.resources.charged()

    def end_yield(self) -> None:
        if self.demand.yield_requested:
            self.demand.yield_requested = False
            self._wake.set()

    async def wait_state(self, *states: ServiceState, timeout_s: float | None = None) -> bool:
        deadline = None if timeout_s is None else self.clock.monotonic() + timeout_s
        while self.state not in states:
            remaining = None if deadline is None else deadline - self.clock.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            await wait_event(self._changed, self.clock, remaining)
        return True

    def snapshot(self) -> ServiceSnapshot:
        ok, why = self.availability()
        return ServiceSnapshot(
            name=self.name,
            lifecycle=self.lifecycle,
            state=str(self.state),
            reason=self.reason,
            available=ok,
            unavailable_reason=why,
            users=tuple(sorted(self.users)),
            health=self.health,
            running=self.state in (ServiceState.READY, ServiceState.STARTING),
            restart_count=self.restart_count,
            start_attempts=self.start_attempts,
            failures_in_window=self.restarts.failures_in_window(),
            pid=self.pid,
            adopted=self.adopted,
            leftover_ids=tuple(self.leftover_ids),
            last_reap=self.last_reap,
        )

    def record(self) -> dict[str, Any]:
        """This service's entry in the state file (:mod:`.service_record`)."""
        return service_record.to_record(self)

    def _persist(self) -> None:
        if self._persist_cb is not None:
            self._persist_cb()

    # ------------------------------------------------------------------ recovery / adoption

    async def recover(self, record: dict[str, Any] | None, *, trusted: bool) -> None:
        """Decide, before the loop starts, whether the service already runs (adoption)."""
        if record:
            service_record.restore(self, record, trusted=trusted)
        self._pending_record = record if trusted else None
        if not self.supported:
            self.recovered = True
            return
        fingerprint = await self.refresh_fingerprint()
        if fingerprint is None:
            self._after_failed_recovery_fingerprint()
            return
        self.recovered = True
        self._adopt_or_not(fingerprint, record if trusted else None)

    async def _retry_recovery(self) -> None:
        """Fingerprint again until it tells whether the service already runs, then adopt."""
        # Could not tell whether it already runs: never risk a duplicate start. Plain
        # sleeps (not the wake event) so fingerprint refreshes cannot spin this branch.
        await self.clock.sleep(self._recovery_retry.next())
        if self._closing or self.recovered:
            return
        fp = await self.refresh_fingerprint()
        if fp is None:
            self._after_failed_recovery_fingerprint()
            return
        self.recovered = True
        self._adopt_or_not(fp, self._pending_record)

    def _after_failed_recovery_fingerprint(self) -> None:
        if (
            self.health == Health.UNDETECTED
            and self.lifecycle != "manual"
            and self.state != ServiceState.UNHEALTHY
        ):
            self._set(
                ServiceState.UNHEALTHY,
                f"executable unusable: {self.health_detail}",
                kind="unhealthy",
            )
        elif self.state == ServiceState.STOPPED:
            # Stay unrecovered (the loop re-fingerprints before any start), but say why: a
            # status file that shows "stopped" with no reason hides a broken module.
            self.reason = (
                "cannot tell whether the service already runs: fingerprint failed "
                f"({self.health_detail}); not starting it until a fingerprint answers"
            )
            self._persist()

    def _adopt_or_not(self, fp: Fingerprint, record: dict[str, Any] | None) -> None:
        """Act on :func:`.adoption.decide`."""
        now = self.clock.monotonic()
        found = adoption.decide(fp, record)
        manual = self.lifecycle == "manual"
        if found is Adoption.REFUSE_REUSED_PID:
            self._emit(
                "refused_adoption",
                f"pid {fp.pid} now belongs to another process (its start time differs from "
                "the one recorded for our service); not adopting it and not signalling it",
                pid=fp.pid,
            )
            self.pid = None
            self.pid_start_ticks = None
            self._emit("lost", "recorded service process is gone (PID reused)")
            self._failure("service process lost (PID reused)", retryable=True)
        elif found is Adoption.ADOPT:
            self.adopted = True
            self.pid = fp.pid
            self.pid_start_ticks = pid_ticks(fp.pid)
            self.precharge()
            if manual:
                self._set(ServiceState.READY, "running (manual)", kind="adopted")
                return
            self._ready_deadline = now + self.spec.ready_timeout_s
            self._set(ServiceState.STARTING, "adopted a running service; waiting for ready")
            self._emit(
                "adopted",
                f"adopted running service (pid {fp.pid}, restarts {self.restart_count})",
                pid=fp.pid,
            )
        elif found is Adoption.STOPPED_WHILE_AWAY:
            if manual:
                self._set(ServiceState.FAILED, "manual service stopped running", kind="failed")
                return
            self._emit("exited_unexpectedly", "service stopped while the agent was away")
            self._failure("service stopped while the agent was away", retryable=True)

    # ------------------------------------------------------------------ tasks

    @property
    def running_tasks(self) -> bool:
        return bool(self._tasks)

    def start_tasks(self, *, reaper: bool = True) -> None:
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._loop(), name=f"oarbank:{self.name}:loop"))
        if self.supported:
            fingerprints = keep_fingerprinting(
                period_s=self.spec.fingerprint_period_s,
                retry=Doubling(
                    self.options.refingerprint_initial_s, self.options.refingerprint_max_s
                ),
                healthy=lambda: self.health_ok is True and self.state not in WITHDRAWN_STATES,
                trigger=self._fp_trigger,
                clock=self.clock,
                closing=lambda: self._closing,
                refresh=self.refresh_fingerprint,
            )
            self._tasks.append(loop.create_task(fingerprints, name=f"oarbank:{self.name}:fp"))
            if reaper and self.lifecycle != "manual":
                reaping = self.owned.reap_periodically(self.clock, lambda: self._closing)
                self._tasks.append(loop.create_task(reaping, name=f"oarbank:{self.name}:reaper"))

    async def stop_tasks(self) -> None:
        self._closing = True
        self._wake.set()
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def shutdown(self, *, stop: bool = True) -> None:
        """Cancel the loops; with ``stop``, stop the service through the protocol."""
        await self.stop_tasks()
        inflight, self._inflight_start = self._inflight_start, None
        if inflight is not None and not inflight.done():
            self._emit("shutdown_waits", "waiting for the running start op before stopping")
            await asyncio.wait({inflight})
        if inflight is not None and inflight.done() and not inflight.cancelled():
            inflight.exception()  # retrieved: a failed start is stopped like any other
        if not stop or self.lifecycle == "manual" or not self.supported:
            return
        if self.state == ServiceState.STOPPED and self.start_attempts == 0 and not self.adopted:
            return
        await self._stop("shutdown")

    # ------------------------------------------------------------------ the reconcile loop

    async def _loop(self) -> None:
        while not self._closing:
            # Always yield once per step: a step that never awaits must not starve the loop.
            await asyncio.sleep(0)
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: reconcile step failed; continuing", self.name)
                await self.clock.sleep(1.0)

    async def _wait(self, timeout: float | None) -> None:
        await wait_event(self._wake, self.clock, timeout)
        self._wake.clear()

    def _want_start(self) -> bool:
        return not self._closing and self.demand.wants_start()

    def _want_keep_running(self) -> bool:
        return not self._closing and self.demand.wants_running()

    async def _step(self) -> None:
        """One reconcile step: act on the current state, or wait until there is a reason to."""
        state = self.state
        if self.lifecycle == "manual" or state in WITHDRAWN_STATES:
            await self._wait(None)
        elif not self.recovered:
            await self._retry_recovery()
        elif state == ServiceState.BACKOFF:
            await self._step_backoff()
        elif state == ServiceState.STOPPED:
            if self._want_start():
                await self._start(restart=False)
            else:
                await self._wait(None)
        elif state == ServiceState.STARTING:  # only after adoption: wait for ready
            async with self._lock:
                await self._finish_start(adopted=True)
        elif state == ServiceState.READY:
            await self._step_ready()
        else:
            await self._wait(1.0)

    async def _step_backoff(self) -> None:
        now = self.clock.monotonic()
        assert self.backoff_until is not None
        if now < self.backoff_until:
            await self._wait(self.backoff_until - now)
        elif self._want_start():
            await self._start(restart=True)
        else:
            self._set(ServiceState.STOPPED, "backoff over; nobody needs the service")

    async def _step_ready(self) -> None:
        """Stop when no longer wanted; otherwise sleep until the next status check or idle
        deadline, and check liveness when it is due."""
        now = self.clock.monotonic()
        if not self._want_keep_running():
            reason = "yielded under memory pressure" if self.yield_requested else "idle timeout"
            await self._stop(reason)
            if self.lifecycle == "on_demand":
                self.demand.yield_requested = False
            return
        wake_at = [self.status_watch.next_at]
        idle = self.demand.idle_deadline()
        if idle is not None:
            wake_at.append(idle)
        await self._wait(max(min(wake_at) - now, 0.0))
        if self.state == ServiceState.READY and self.clock.monotonic() >= self.status_watch.next_at:
            await self._check_alive()

    # ------------------------------------------------------------------ the moves

    async def _start(self, *, restart: bool) -> None:
        async with self._lock:
            if self._closing:
                return
            if restart:
                self.restart_count += 1
            self.start_attempts += 1
            self._set(ServiceState.STARTING, "restarting" if restart else "starting")
            self.precharge()
            start_op = asyncio.ensure_future(self.ops.start())
            self._inflight_start = start_op
            try:
                result = await asyncio.shield(start_op)
            except ExecError as exc:
                self.resources.discharge()
                self._emit("start_failed", exc.reason)
                self._failure(f"start failed: {exc.reason}", retryable=exc.retryable)
                return
            if result.pid:
                self.pid = result.pid
                self.pid_start_ticks = pid_ticks(result.pid)
            self.adopted = False
            self._persist()  # the PID guard must survive an agent killed before "ready"
            self._ready_deadline = self.clock.monotonic() + self.spec.ready_timeout_s
            self._emit("started", result.msg or "start returned", pid=result.pid)
            await self._finish_start(adopted=False)

    async def _finish_start(self, *, adopted: bool) -> None:
        ok, why = await self.readiness.wait(self._ready_deadline, lambda: self._closing)
        if ok:
            now = self.clock.monotonic()
            self.restarts.on_running(now)
            self.status_watch.restart(now)
            self.demand.ready_at(now)
            self._set(ServiceState.READY, "adopted and ready" if adopted else "ready", kind="ready")
            return
        if self._closing:
            return
        # Half-started: stop it before retrying, so a retry never stacks a second instance.
        with contextlib.suppress(ExecError):
            await self.ops.stop()
        self.resources.discharge()
        self._emit("start_failed", why)
        self._failure(why, retryable=True)

    async def _check_alive(self) -> None:
        async with self._lock:
            if self.state != ServiceState.READY:
                return
            reason = await self.status_watch.check()
            if reason is None:
                return
            self.resources.discharge()
            self._emit("exited_unexpectedly", reason)
            self._failure(reason, retryable=True)

    def _failure(self, reason: str, *, retryable: bool) -> None:
        now = self.clock.monotonic()
        plan = self.restarts.after_failure(reason, retryable=retryable)
        if plan.give_up:
            self._set(ServiceState.UNHEALTHY, plan.reason, kind="unhealthy")
            return
        self.backoff_until = now + plan.delay_s
        self._set(ServiceState.BACKOFF, plan.reason, kind="restart_scheduled", delay_s=plan.delay_s)

    async def _stop(self, reason: str) -> None:
        async with self._lock:
            self._set(ServiceState.STOPPING, reason)
            outcome = await self.stopper.stop()
            self.last_stop = outcome
            self.resources.discharge()
            self.restarts.on_stopped()
            self.pid = None
            self.pid_start_ticks = None
            self.adopted = False
            if outcome.stopped:
                self.leftover_ids = []
                note = " (escalated)" if outcome.escalated else ""
                if outcome.claimed_but_running:
                    note += f"; {outcome.reason}"
                self._set(ServiceState.STOPPED, f"{reason}{note}", kind="stopped")
            else:
                self.leftover_ids = outcome.leftovers
                self._set(ServiceState.UNHEALTHY, outcome.reason, kind="unhealthy")

    # ------------------------------------------------------------------ fingerprints

    async def refresh_fingerprint(self) -> Fingerprint | None:
        """Fingerprint now and update health, pools and manual-service state."""
        change = await self.health_view.refresh()
        announcement = change.announcement()
        if announcement is not None:
            self._emit(*announcement)
        if change.recovered and self.state == ServiceState.UNHEALTHY and self.lifecycle != "manual":
            # An unhealthy service gets a fresh start when the module reports recovery.
            self.restarts.reset()
            self._set(ServiceState.STOPPED, "fingerprint healthy again", kind="recovered")
        if self.lifecycle == "manual" and change.fingerprint is not None:
            self._track_manual(change.fingerprint)
        self.update_capacity()
        if change.changed:
            self._wake.set()
        return change.fingerprint

    def _track_manual(self, fp: Fingerprint) -> None:
        if fp.running and self.state in (ServiceState.STOPPED, ServiceState.FAILED):
            self.pid = fp.pid
            self._set(ServiceState.READY, "manual service is running", kind="ready")
        elif not fp.running and self.state == ServiceState.READY:
            self.pid = None
            self._set(
                ServiceState.FAILED,
                "manual service stopped running; not restarting it (operator action needed)",
                kind="failed",
            )

    def update_capacity(self) -> None:
        ok, _ = self.availability()
        if self.lifecycle == "manual":
            ok = ok and self.state == ServiceState.READY
        self.resources.publish_capacity(self.fingerprint, available=ok)

    # ------------------------------------------------------------------ owned objects

    async def reap_once(self, liveness: Liveness | None = None) -> ReapReport:
        """One reaping period (:meth:`.OwnedObjects.reap_once`); never concurrent with start."""
        return await self.owned.reap_once(liveness)

    async def clear_owned(self, liveness: Liveness) -> ClearReport:
        """Teardown: reap the objects of attempts that are not live, then check they are gone
        (:meth:`.OwnedObjects.clear`)."""
        return await self.owned.clear(liveness)

    # ------------------------------------------------------------------ helpers

    def _set(
        self, state: ServiceState, reason: str, *, kind: str | None = None, **data: Any
    ) -> None:
        changed = state != self.state
        self.state = state
        self.reason = reason
        self.update_capacity()
        # Save before announcing: whoever reacts to the event (the status file, a test, srt)
        # may act on it at once, and an agent killed right after must find the same facts
        # in its state file.
        self._persist()
        if kind is not None:
            self._emit(kind, reason, **data)
        elif changed:
            self._emit(f"state:{state}", reason, **data)
        if changed:
            self._wake.set()
        event, self._changed = self._changed, asyncio.Event()
        event.set()

    def _emit(self, kind: str, message: str, /, **data: Any) -> None:
        self.events.emit(
            ManagerEvent(kind, self.name, message, self.clock.monotonic(), data=dict(data))
        )
