"""One service's lifecycle on one node: the state machine behind the module manager.

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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from oarbank_protocol.documents import (
    LABEL_ATTEMPT,
    LABEL_NODE,
    LABEL_SERVICE,
    Fingerprint,
    Health,
    OpResult,
)
from oarbank_protocol.errors import (
    AdmissionTimeout,
    CapabilityUnavailable,
    ExecError,
    ExecutableError,
    ServiceStartFailed,
)
from oarbank_protocol.execution import process_identity
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.execution.process_identity import pid_ticks
from oarbank_protocol.lifecycle.clock import Clock, wait_event
from oarbank_protocol.lifecycle.events import EventLog, ManagerEvent
from oarbank_protocol.lifecycle.reaper import (
    Liveness,
    LivenessUnknown,
    ReapPolicy,
    ReapReport,
    ask_liveness,
    reap_objects,
    select_candidates,
)
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.restart import RestartBudget
from oarbank_protocol.manifest import ServiceSpec
from oarbank_protocol.names import is_object_id

log = logging.getLogger(__name__)


class ServiceState(StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    BACKOFF = "backoff"
    UNHEALTHY = "unhealthy"
    FAILED = "failed"
    UNSUPPORTED = "unsupported"


WITHDRAWN_STATES = frozenset(
    {ServiceState.UNHEALTHY, ServiceState.FAILED, ServiceState.UNSUPPORTED}
)


@dataclass(frozen=True)
class SupervisorOptions:
    """Knobs the manifest does not carry; defaults from the fault matrix."""

    reap_period_s: float = 60.0
    reap_budget_s: float = 30.0
    max_destroys_per_period: int = 64
    destroy_concurrency: int = 4
    liveness_timeout_s: float = 10.0
    status_failure_threshold: int = 3
    ready_not_running_grace: int = 3
    refingerprint_initial_s: float = 5.0
    refingerprint_max_s: float = 120.0
    escalation_budget_s: float | None = None
    """Total time for ``destroy --force`` after a hung stop; None = the destroy timeout (60 s)."""
    escalation_destroy_timeout_s: float = 60.0


@dataclass
class ClearReport:
    """What a teardown's reaping left: ids still listed, ids it had to force, why not clean."""

    reap: ReapReport
    forced: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    problem: str = ""

    @property
    def clean(self) -> bool:
        return not (self.leftovers or self.forced or self.failed or self.problem)


@dataclass(frozen=True)
class ServiceSnapshot:
    name: str
    lifecycle: str
    state: str
    reason: str
    available: bool
    unavailable_reason: str
    users: tuple[str, ...]
    health: str
    running: bool
    restart_count: int
    start_attempts: int
    failures_in_window: int
    pid: int | None
    adopted: bool
    leftover_ids: tuple[str, ...]
    last_reap: ReapReport | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class StopOutcome:
    """How the last stop went; an agent reports a stop that was not what it claimed."""

    stopped: bool
    escalated: bool = False
    reason: str = ""
    leftovers: list[str] = field(default_factory=list)
    #: ``stop`` exited 0 but ``status`` still said running afterwards.
    claimed_but_running: bool = False


class ServiceSupervisor:
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
        self.resources = resources
        self.events = events
        self.options = options or SupervisorOptions()
        self.liveness = liveness
        self._persist_cb = persist
        self.supported = supported
        self.tracker = RestartBudget(spec.restart, clock.monotonic, rng)
        self.state = ServiceState.STOPPED if supported else ServiceState.UNSUPPORTED
        self.reason = "" if supported else "not supported on this platform"
        self.users: dict[str, float] = {}
        self.idle_since: float | None = None
        self.backoff_until: float | None = None
        self.restart_count = 0
        self.start_attempts = 0
        self.fingerprint: Fingerprint | None = None
        self.health: str = "unknown"
        self.health_ok: bool | None = None
        self.health_detail = "not fingerprinted yet"
        self.pid: int | None = None
        self.pid_start_ticks: int | None = None
        self.adopted = False
        self.leftover_ids: list[str] = []
        self.last_reap: ReapReport | None = None
        self.last_stop: StopOutcome | None = None
        self.yield_requested = False
        self.recovered = False
        self._pending_record: dict[str, Any] | None = None
        self._recovery_delay = self.options.refingerprint_initial_s
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._fp_trigger = asyncio.Event()
        self._closing = False
        self._status_errors = 0
        self._next_status_at = 0.0
        self._ready_deadline: float | None = None
        self._tasks: list[asyncio.Task[None]] = []
        #: A ``start`` op still running when shutdown cancelled the loop: shutdown lets it
        #: finish (its own timeout bounds it) before ``stop``, because killing a start
        #: half-way can leave what it already launched unrecorded by the module.
        self._inflight_start: asyncio.Future[OpResult] | None = None

    # ------------------------------------------------------------------ public API

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def lifecycle(self) -> str:
        return self.spec.lifecycle

    @property
    def memory_holder(self) -> str:
        return f"service:{self.name}"

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
        if not self.spec.reserves_host_memory or self.fingerprint is None:
            return 0.0
        if self.resources.charged(self.memory_holder) > 0:
            return 0.0
        return self.fingerprint.reserve.mem_gb

    def precharge(self) -> None:
        """Book this service's reservation before it starts (admission already checked it)."""
        if self.spec.reserves_host_memory and self.fingerprint is not None:
            self.resources.charge(self.memory_holder, self.fingerprint.reserve.mem_gb)

    async def acquire(self, attempt_id: str, *, timeout_s: float | None = None) -> None:
        """Add a user and wait until the service is ready (starting it if needed)."""
        ok, why = self.availability()
        if not ok:
            raise CapabilityUnavailable(self.name, why)
        added = attempt_id not in self.users
        self.users[attempt_id] = self.clock.monotonic()
        self.idle_since = None
        self.yield_requested = False
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
        if self.users.pop(attempt_id, None) is None:
            return False
        if not self.users:
            self.idle_since = self.clock.monotonic()
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
        self.tracker.reset()
        self.leftover_ids = []
        self._set(ServiceState.STOPPED, "reset by operator", kind="reset")
        self._fp_trigger.set()
        return True

    def _may_yield(self) -> bool:
        return (
            self.spec.yieldable
            and self.lifecycle != "manual"
            and self.state == ServiceState.READY
            and not self.users
        )

    def yieldable_gb(self) -> float:
        """The memory a yield would free now (0 when this service may not yield)."""
        return self.resources.charged(self.memory_holder) if self._may_yield() else 0.0

    def request_yield(self) -> float:
        """Ask the loop to stop this idle service for memory; returns the GB it will free."""
        if not self._may_yield():
            return 0.0
        self.yield_requested = True
        self._wake.set()
        return self.resources.charged(self.memory_holder)

    def end_yield(self) -> None:
        if self.yield_requested:
            self.yield_requested = False
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
            failures_in_window=self.tracker.failures_in_window(),
            pid=self.pid,
            adopted=self.adopted,
            leftover_ids=tuple(self.leftover_ids),
            last_reap=self.last_reap,
        )

    # ------------------------------------------------------------------ persistence

    def record(self) -> dict[str, Any]:
        return {
            "state": str(self.state),
            "reason": self.reason,
            "restart_count": self.restart_count,
            "start_attempts": self.start_attempts,
            "pid": self.pid,
            "pid_start_ticks": self.pid_start_ticks,
            "users": sorted(self.users),
            "tracker": self.tracker.to_record(),
            "leftover_ids": list(self.leftover_ids),
        }

    def _persist(self) -> None:
        if self._persist_cb is not None:
            self._persist_cb()

    def _restore_counters(self, record: dict[str, Any], *, trusted: bool) -> None:
        with contextlib.suppress(TypeError, ValueError):
            self.restart_count = max(int(record.get("restart_count", 0)), 0)
            self.start_attempts = max(int(record.get("start_attempts", 0)), 0)
        leftovers = record.get("leftover_ids")
        if isinstance(leftovers, list):
            self.leftover_ids = [str(x) for x in leftovers]
        if trusted:
            # Failure timestamps are CLOCK_MONOTONIC readings, which Linux keeps system-wide
            # and continuous within one boot, so they stay meaningful in a new agent process.
            # Users are not restored: attempts re-admit after an agent restart, and a stale
            # user must never pin an on_demand service forever.
            tracker = record.get("tracker")
            if isinstance(tracker, dict):
                self.tracker.restore(tracker)

    # ------------------------------------------------------------------ recovery / adoption

    async def recover(self, record: dict[str, Any] | None, *, trusted: bool) -> None:
        """Decide, before the loop starts, whether the service already runs (adoption).

        ``fingerprint.running`` is the truth. A recorded PID is used only as a guard: if the
        module reports the same PID but it now belongs to a process created at another time,
        it is a recycled PID, so we refuse to adopt it and never signal it.
        """
        if record:
            self._restore_counters(record, trusted=trusted)
        self._pending_record = record if trusted else None
        if not self.supported:
            self.recovered = True
            return
        fingerprint = await self.refresh_fingerprint()
        if fingerprint is None:
            self._after_failed_recovery_fingerprint()
            return
        self.recovered = True
        await self._adopt_or_not(fingerprint, record if trusted else None)

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

    async def _adopt_or_not(self, fp: Fingerprint, record: dict[str, Any] | None) -> None:
        now = self.clock.monotonic()
        recorded_state = str(record.get("state", "")) if record else ""
        if fp.running:
            if (
                record
                and fp.pid is not None
                and fp.pid == record.get("pid")
                and record.get("pid_start_ticks") is not None
                and process_identity.alive(fp.pid)
                and not process_identity.same_process(fp.pid, record.get("pid_start_ticks"))
            ):
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
                return
            self.adopted = True
            self.pid = fp.pid
            self.pid_start_ticks = pid_ticks(fp.pid)
            self.precharge()
            if self.lifecycle == "manual":
                self._set(ServiceState.READY, "running (manual)", kind="adopted")
                return
            self._ready_deadline = now + self.spec.ready_timeout_s
            self._set(ServiceState.STARTING, "adopted a running service; waiting for ready")
            self._emit(
                "adopted",
                f"adopted running service (pid {fp.pid}, restarts {self.restart_count})",
                pid=fp.pid,
            )
            return
        was_running = recorded_state in (
            ServiceState.READY,
            ServiceState.STARTING,
            ServiceState.STOPPING,
        )
        if self.lifecycle == "manual":
            if was_running:
                self._set(ServiceState.FAILED, "manual service stopped running", kind="failed")
            return
        if was_running:
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
            self._tasks.append(
                loop.create_task(self._fingerprint_loop(), name=f"oarbank:{self.name}:fp")
            )
            if reaper and self.lifecycle != "manual":
                self._tasks.append(
                    loop.create_task(self._reaper_loop(), name=f"oarbank:{self.name}:reaper")
                )

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

    def _idle_deadline(self) -> float | None:
        if self.lifecycle != "on_demand" or self.users:
            return None
        since = self.idle_since if self.idle_since is not None else self.clock.monotonic()
        if self.idle_since is None:
            self.idle_since = since
        return since + self.spec.idle_timeout_s

    def _want_start(self) -> bool:
        if self._closing or self.lifecycle == "manual":
            return False
        if self.lifecycle == "always":
            return not self.yield_requested
        return bool(self.users)

    def _want_keep_running(self) -> bool:
        if self._closing or self.yield_requested:
            return False
        if self.lifecycle == "always" or self.users:
            return True
        deadline = self._idle_deadline()
        return deadline is not None and self.clock.monotonic() < deadline

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

    async def _retry_recovery(self) -> None:
        """Fingerprint again until it tells whether the service already runs, then adopt."""
        # Could not tell whether it already runs: never risk a duplicate start. Plain
        # sleeps (not the wake event) so fingerprint refreshes cannot spin this branch.
        await self.clock.sleep(self._recovery_delay)
        self._recovery_delay = min(self._recovery_delay * 2, self.options.refingerprint_max_s)
        if self._closing or self.recovered:
            return
        fp = await self.refresh_fingerprint()
        if fp is None:
            self._after_failed_recovery_fingerprint()
            return
        self.recovered = True
        await self._adopt_or_not(fp, self._pending_record)

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
                self.yield_requested = False
            return
        wake_at = [self._next_status_at]
        idle = self._idle_deadline()
        if idle is not None:
            wake_at.append(idle)
        await self._wait(max(min(wake_at) - now, 0.0))
        if self.state == ServiceState.READY and self.clock.monotonic() >= self._next_status_at:
            await self._check_alive()

    # ------------------------------------------------------------------ start / ready

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
                self.resources.discharge(self.memory_holder)
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
        ok, why = await self._await_ready()
        if ok:
            now = self.clock.monotonic()
            self.tracker.on_running(now)
            self._next_status_at = now + self.spec.status_period_s
            self._status_errors = 0
            if not self.users:
                self.idle_since = now
            self._set(ServiceState.READY, "adopted and ready" if adopted else "ready", kind="ready")
            return
        if self._closing:
            return
        # Half-started: stop it before retrying, so a retry never stacks a second instance.
        with contextlib.suppress(ExecError):
            await self.ops.stop()
        self.resources.discharge(self.memory_holder)
        self._emit("start_failed", why)
        self._failure(why, retryable=True)

    async def _await_ready(self) -> tuple[bool, str]:
        deadline = self._ready_deadline or (self.clock.monotonic() + self.spec.ready_timeout_s)
        not_running = 0
        last = "no answer yet"
        violation_logged = False
        while not self._closing:
            try:
                status = await self.ops.ready()
            except ExecError as exc:
                last = exc.reason
            else:
                if status.ready and not status.running:
                    if not violation_logged:
                        violation_logged = True
                        self._emit(
                            "protocol_violation",
                            "ready said ready=true with running=false; not treating it as ready",
                        )
                elif status.ready:
                    return True, ""
                last = status.detail or f"running={status.running}, ready={status.ready}"
                if not status.running:
                    not_running += 1
                    if not_running >= self.options.ready_not_running_grace:
                        return False, (
                            "start reported success but the service is not running "
                            f"(ready said running=false {not_running} times)"
                        )
                else:
                    not_running = 0
            now = self.clock.monotonic()
            if now >= deadline:
                return False, (
                    f"readiness timeout after {self.spec.ready_timeout_s:g} s; last: {last}"
                )
            await self.clock.sleep(min(self.spec.ready_poll_s, deadline - now))
        return False, "shutting down"

    # ------------------------------------------------------------------ liveness

    async def _check_alive(self) -> None:
        async with self._lock:
            if self.state != ServiceState.READY:
                return
            try:
                status = await self.ops.status()
            except ExecError as exc:
                self._status_errors += 1
                self._next_status_at = self.clock.monotonic() + self.spec.status_period_s
                if self._status_errors < self.options.status_failure_threshold:
                    return
                reason = f"status failed {self._status_errors} times; last: {exc.reason}"
            else:
                self._status_errors = 0
                self._next_status_at = self.clock.monotonic() + self.spec.status_period_s
                if status.running:
                    return
                reason = "service exited unexpectedly (status says running=false)"
            self.resources.discharge(self.memory_holder)
            self._emit("exited_unexpectedly", reason)
            self._failure(reason, retryable=True)

    def _failure(self, reason: str, *, retryable: bool) -> None:
        now = self.clock.monotonic()
        decision = self.tracker.on_failure()
        if not retryable:
            self._set(ServiceState.UNHEALTHY, f"{reason} (not retryable)", kind="unhealthy")
            return
        if decision.give_up:
            self._set(
                ServiceState.UNHEALTHY,
                f"{decision.failures_in_window} failures within "
                f"{self.spec.restart.window_s:g} s (max_failures "
                f"{self.spec.restart.max_failures}); last: {reason}",
                kind="unhealthy",
            )
            return
        self.backoff_until = now + decision.delay_s
        self._set(
            ServiceState.BACKOFF,
            f"{reason}; next start in {decision.delay_s:.2f} s",
            kind="restart_scheduled",
            delay_s=decision.delay_s,
        )

    # ------------------------------------------------------------------ stop

    async def _stop(self, reason: str) -> None:
        async with self._lock:
            self._set(ServiceState.STOPPING, reason)
            outcome = await self._stop_with_escalation()
            self.last_stop = outcome
            self.resources.discharge(self.memory_holder)
            self.tracker.on_stopped()
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

    async def _still_running(self) -> bool:
        """Whether ``status`` says the service runs; unknown (status failing) counts as no."""
        try:
            status = await self.ops.status()
        except ExecError as exc:
            self._emit("stop_unverified", f"status after stop failed: {exc.reason}")
            return False
        return status.running

    async def _stop_with_escalation(self) -> StopOutcome:
        try:
            result = await self.ops.stop()
        except ExecError as exc:
            return await self._escalate(exc.reason, claimed=False)
        # Exit 0 is the module's claim; status is the check. A stop that "succeeds" while
        # the service keeps running takes the same escalation as a stop that failed.
        if not await self._still_running():
            return StopOutcome(True, escalated=result.escalated)
        first = "stop exited 0 but status still says running"
        self._emit("protocol_violation", first)
        return await self._escalate(first, claimed=True)

    async def _escalate(self, first: str, *, claimed: bool) -> StopOutcome:
        """After a failed (or untrue) stop: destroy our owned objects with ``--force``, then
        check with ``status`` that the service is gone."""
        self._emit("stop_escalated", f"{first}; destroying owned objects with --force")
        try:
            owned = await self.ops.list_owned()
        except ExecError as exc:
            return StopOutcome(
                False,
                reason=f"stop failed ({first}) and list_owned failed ({exc.reason})",
                claimed_but_running=claimed,
            )
        mine = [
            o.id
            for o in owned.objects
            if o.labels.get(LABEL_NODE) == self.node_id
            and o.labels.get(LABEL_SERVICE) == self.name
            and is_object_id(o.id)
        ]
        failed = await self._force_destroy(mine)
        if failed:
            leftovers = sorted(failed)
            return StopOutcome(
                False,
                reason=f"stop failed ({first}); destroy --force failed for "
                f"{len(leftovers)} owned object(s): {', '.join(leftovers)}",
                leftovers=leftovers,
                claimed_but_running=claimed,
            )
        if await self._still_running():
            return StopOutcome(
                False,
                reason=f"stop failed ({first}); owned objects destroyed but the service "
                "still reports running",
                claimed_but_running=claimed,
            )
        return StopOutcome(True, escalated=True, reason=first, claimed_but_running=claimed)

    async def _force_destroy(self, object_ids: list[str]) -> dict[str, str]:
        """``destroy --force`` each object within the escalation budget; the ones that failed
        or were not reached in time, with why."""
        failed: dict[str, str] = {}
        if not object_ids:
            return failed
        budget = self.options.escalation_budget_s or self.options.escalation_destroy_timeout_s
        semaphore = asyncio.Semaphore(max(self.options.destroy_concurrency, 1))

        async def force(object_id: str) -> None:
            async with semaphore:
                try:
                    await self.ops.destroy(object_id, force=True)
                except ExecError as exc:
                    failed[object_id] = exc.reason

        tasks = [asyncio.ensure_future(force(i)) for i in object_ids]
        _, pending = await asyncio.wait(tasks, timeout=budget)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for object_id, task in zip(object_ids, tasks, strict=True):
            if task in pending:
                failed[object_id] = "not destroyed within the escalation budget"
        return failed

    # ------------------------------------------------------------------ fingerprints

    async def refresh_fingerprint(self) -> Fingerprint | None:
        """Fingerprint now and update health, pools and manual-service state."""
        previous_ok = self.health_ok
        fingerprint, health, ok, detail = await self._fingerprint_health()
        self.health, self.health_ok, self.health_detail = health, ok, detail
        if fingerprint is not None:
            self.fingerprint = fingerprint
            extra = set(fingerprint.pools) - set(self.spec.pools)
            if extra:
                log.warning("%s: ignoring undeclared pools %s", self.name, sorted(extra))
        self._on_health(previous_ok, ok, f"{health}: {detail}")
        if self.lifecycle == "manual" and fingerprint is not None:
            self._track_manual(fingerprint)
        self.update_capacity()
        if previous_ok is not ok:
            self._wake.set()
        return fingerprint

    async def _fingerprint_health(self) -> tuple[Fingerprint | None, str, bool, str]:
        """(fingerprint or None, health, healthy?, detail); a fingerprint that cannot run
        reads as ``undetected``, one that fails otherwise as ``error``."""
        try:
            fingerprint = await self.ops.fingerprint()
        except ExecutableError as exc:
            return None, str(Health.UNDETECTED), False, exc.reason
        except ExecError as exc:
            return None, "error", False, exc.reason
        health = fingerprint.health
        return fingerprint, health, health == "healthy", fingerprint.detail or health

    def _on_health(self, previous_ok: bool | None, ok: bool, what: str) -> None:
        """Announce a change of health; an unhealthy service gets a fresh start (its failure
        history cleared) when its fingerprint turns healthy again."""
        if previous_ok is not ok and previous_ok is not None:
            kind = "capability_restored" if ok else "capability_withdrawn"
            self._emit(kind, f"fingerprint {what}")
        elif previous_ok is None and not ok:
            self._emit("fingerprint_failed", f"first fingerprint {what}")
        if (
            ok
            and previous_ok is False
            and self.state == ServiceState.UNHEALTHY
            and self.lifecycle != "manual"
        ):
            self.tracker.reset()
            self._set(ServiceState.STOPPED, "fingerprint healthy again", kind="recovered")

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
        if ok and self.fingerprint is not None:
            declared = set(self.spec.pools)
            self.resources.set_capacity(
                self.name, {k: v for k, v in self.fingerprint.pools.items() if k in declared}
            )
        else:
            self.resources.clear_capacity(self.name)

    async def _fingerprint_loop(self) -> None:
        delay = self.options.refingerprint_initial_s
        while not self._closing:
            healthy = self.health_ok is True and self.state not in WITHDRAWN_STATES
            if healthy:
                delay = self.options.refingerprint_initial_s
                timeout = self.spec.fingerprint_period_s
            else:
                timeout = delay
                delay = min(delay * 2, self.options.refingerprint_max_s)
            triggered = await wait_event(self._fp_trigger, self.clock, timeout)
            self._fp_trigger.clear()
            if triggered:
                delay = self.options.refingerprint_initial_s
            if self._closing:
                return
            await self.refresh_fingerprint()

    # ------------------------------------------------------------------ reaping

    async def _reaper_loop(self) -> None:
        while not self._closing:
            await self.clock.sleep(self.options.reap_period_s)
            if self._closing:
                return
            try:
                await self.reap_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: reaping failed; will retry next period", self.name)

    async def reap_once(self, liveness: Liveness | None = None) -> ReapReport:
        """One reaping period (see :mod:`oarbank_protocol.lifecycle.reaper`); never concurrent with start."""
        policy = self._reap_policy()
        async with self._lock:
            try:
                owned = await self.ops.list_owned()
            except ExecError as exc:
                report = ReapReport(self.name, skipped=f"list_owned failed: {exc.reason}")
                self._emit("reap_failed", report.skipped or "")
                self.last_reap = report
                return report

            async def destroy(object_id: str) -> object:
                return await self.ops.destroy(object_id)

            report = await reap_objects(
                owned.objects,
                policy=policy,
                liveness=liveness or self.liveness,
                local_live=frozenset(self.users),
                destroy=destroy,
            )
        self.last_reap = report
        if report.skipped and report.candidates:
            self._emit("reap_skipped", f"not reaping this period: {report.skipped}")
        if report.destroyed:
            self._emit(
                "reaped",
                f"destroyed {len(report.destroyed)} object(s) of dead attempts",
                ids=list(report.destroyed),
            )
        if report.failed:
            self._emit(
                "reap_failed",
                f"{len(report.failed)} destroy(s) failed; retrying next period",
                failed=dict(report.failed),
            )
        return report

    def _reap_policy(self) -> ReapPolicy:
        return ReapPolicy(
            node_id=self.node_id,
            service=self.name,
            max_destroys=self.options.max_destroys_per_period,
            concurrency=self.options.destroy_concurrency,
            budget_s=self.options.reap_budget_s,
            liveness_timeout_s=self.options.liveness_timeout_s,
        )

    async def clear_owned(self, liveness: Liveness) -> ClearReport:
        """Teardown: reap what belongs to attempts that are not live, then check it is gone.

        A destroy that exits 0 is a claim; ``list_owned`` afterwards is the check. An object
        still busy after a stop means something the module started still runs: it is
        destroyed with ``--force`` (the attempt is gone and the service stopped) and reported,
        because the stop did not do what it said.
        """
        reap = await self.reap_once(liveness)
        out = ClearReport(reap)
        for round_ in range(2):
            async with self._lock:
                try:
                    owned = await self.ops.list_owned()
                except ExecError as exc:
                    out.problem = f"list_owned after reaping failed: {exc.reason}"
                    return out
                scratch = ReapReport(self.name)
                candidates = select_candidates(owned.objects, self._reap_policy(), scratch)
                attempts = frozenset(o.labels[LABEL_ATTEMPT] for o in candidates)
                try:
                    answer = await ask_liveness(liveness, attempts, self.options.liveness_timeout_s)
                except LivenessUnknown as exc:
                    out.problem = f"cannot tell which attempts are live: {exc}"
                    out.leftovers = sorted(o.id for o in candidates)
                    return out
                gone = [o for o in candidates if answer.get(o.labels[LABEL_ATTEMPT]) is not True]
                out.leftovers = sorted(o.id for o in gone)
                busy = [o.id for o in gone if o.busy]
                if round_ == 1 or not busy:
                    return out
                self._emit(
                    "protocol_violation",
                    f"{len(busy)} owned object(s) still busy after the service stopped: "
                    f"{', '.join(busy[:5])}; destroying them with --force",
                )
                for object_id in busy:
                    try:
                        await self.ops.destroy(object_id, force=True)
                    except ExecError as exc:
                        out.failed[object_id] = exc.reason
                    else:
                        out.forced.append(object_id)
        return out

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

    def _emit(self, kind: str, message: str, **data: Any) -> None:
        self.events.emit(
            ManagerEvent(kind, self.name, message, self.clock.monotonic(), data=dict(data))
        )
