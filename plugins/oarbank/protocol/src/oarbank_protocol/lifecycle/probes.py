"""Probes: executables that implement only ``fingerprint`` and establish a capability.

A capability is available while its probe reports healthy: the first unhealthy report
withdraws it (the protocol's rule). The failure threshold only delays the *announcement*
(event and log line), so a probe that flaps every period does not spam the log; the
success threshold delays regaining it (see :mod:`.thresholds`). A probe that cannot run at all
(missing, not executable, timeout, malformed output) counts as a failed observation.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from oarbank_protocol.documents import Fingerprint
from oarbank_protocol.errors import ExecError
from oarbank_protocol.execution.client import FingerprintSource
from oarbank_protocol.lifecycle.clock import Clock, SystemClock, wait_event
from oarbank_protocol.lifecycle.events import EventLog, ManagerEvent
from oarbank_protocol.lifecycle.thresholds import HealthFilter
from oarbank_protocol.manifest import ProbeSpec


@dataclass(frozen=True)
class ProbeOutcome:
    """One fingerprint of a probe: healthy or not, and why."""

    healthy: bool
    detail: str
    fingerprint: Fingerprint | None = None


async def check_probe(source: FingerprintSource) -> ProbeOutcome:
    """Run a probe's fingerprint once; never raises for executable problems.

    This is what a readiness gate on a probe needs: a yes/no plus a reason to show.
    """
    try:
        fingerprint = await source.fingerprint()
    except ExecError as exc:
        return ProbeOutcome(False, exc.reason)
    healthy = fingerprint.health == "healthy"
    detail = fingerprint.detail or f"health: {fingerprint.health}"
    return ProbeOutcome(healthy, detail, fingerprint)


class ProbeMonitor:
    """Runs one probe every ``period_s`` (and on :meth:`trigger`) and tracks availability."""

    def __init__(
        self,
        spec: ProbeSpec,
        source: FingerprintSource,
        *,
        clock: Clock | None = None,
        events: EventLog | None = None,
        supported: bool = True,
    ) -> None:
        self.spec = spec
        self.source = source
        self.clock = clock or SystemClock()
        self.events = events or EventLog()
        self.supported = supported
        self.filter = HealthFilter(spec.failure_threshold, spec.success_threshold)
        self.last: ProbeOutcome | None = None
        self.checks = 0
        self._trigger = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def available(self) -> bool:
        return self.supported and self.filter.available

    def unavailable_reason(self) -> str:
        if not self.supported:
            return "probe is not supported on this platform"
        if self.filter.state is None:
            return "probe has not reported yet"
        detail = self.last.detail if self.last else "unknown"
        if self.filter.available:
            return ""
        if self.filter.failures == 0:
            return (
                f"probe {self.name!r} healthy for {self.filter.successes} of the "
                f"{self.filter.success_threshold} checks in a row it needs"
            )
        return f"probe {self.name!r} reports unhealthy: {detail}"

    async def check_once(self) -> bool:
        # One fingerprint at a time: a doctor run and the period must not both count.
        async with self._lock:
            return await self._check()

    async def _check(self) -> bool:
        outcome = await check_probe(self.source)
        self.last = outcome
        self.checks += 1
        if self.filter.observe(outcome.healthy):
            kind = "capability_restored" if self.filter.state else "capability_withdrawn"
            self.events.emit(ManagerEvent(kind, self.name, outcome.detail, self.clock.monotonic()))
        return self.available

    def trigger(self) -> None:
        """Re-run the probe now (doctor-triggering events) instead of at the next period."""
        self._trigger.set()

    async def run(self) -> None:
        if not self.supported:
            return
        while True:
            await self.check_once()
            await wait_event(self._trigger, self.clock, self.spec.period_s)
            self._trigger.clear()
