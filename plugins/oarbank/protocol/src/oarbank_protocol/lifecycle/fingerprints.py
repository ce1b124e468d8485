"""What a service's fingerprints say about it, and when to ask again.

``fingerprint`` is the module's own view of its service: health, the pool tokens it can
provide, the memory it reserves, whether it runs. The supervisor acts on *changes* of
health (withdrawing or restoring the capability, giving an unhealthy service a fresh start
when it turns healthy again), so :meth:`ServiceHealth.refresh` reports the change along
with the new facts.

When to fingerprint: every ``fingerprint_period_s`` while healthy; while not, sooner and
backing off (5 s doubling to 2 min by default), so a host that gets fixed is noticed soon
without hammering a broken executable. A trigger (an operator's reset) asks at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from oarbank_protocol.documents import Fingerprint, Health
from oarbank_protocol.errors import ExecError, ExecutableError
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.lifecycle.clock import Clock, wait_event

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HealthChange:
    """The outcome of one fingerprint, against what the one before it said."""

    fingerprint: Fingerprint | None
    previous_ok: bool | None
    ok: bool
    #: ``health: detail``, for messages
    what: str

    @property
    def changed(self) -> bool:
        return self.previous_ok is not self.ok

    @property
    def recovered(self) -> bool:
        """Not healthy before, healthy now (the module reports that it recovered)."""
        return self.ok and self.previous_ok is False

    def announcement(self) -> tuple[str, str] | None:
        """(event kind, message) when the change is worth an event: health flipped, or the
        very first fingerprint is not healthy."""
        if self.changed and self.previous_ok is not None:
            kind = "capability_restored" if self.ok else "capability_withdrawn"
            return kind, f"fingerprint {self.what}"
        if self.previous_ok is None and not self.ok:
            return "fingerprint_failed", f"first fingerprint {self.what}"
        return None


class ServiceHealth:
    """The last fingerprint of one service and the health it gave."""

    def __init__(self, name: str, ops: ServiceOps, declared_pools: Iterable[str]) -> None:
        self.name = name
        self.ops = ops
        self.declared_pools = frozenset(declared_pools)
        self.fingerprint: Fingerprint | None = None
        #: ``healthy``/``unhealthy``/``undetected`` from the module, ``error`` when the
        #: fingerprint failed otherwise, ``unknown`` before the first one
        self.health = "unknown"
        self.ok: bool | None = None
        self.detail = "not fingerprinted yet"

    async def refresh(self) -> HealthChange:
        """Fingerprint now and remember what it said."""
        previous_ok = self.ok
        fingerprint, health, ok, detail = await self._read()
        self.health, self.ok, self.detail = health, ok, detail
        if fingerprint is not None:
            self.fingerprint = fingerprint
            extra = set(fingerprint.pools) - self.declared_pools
            if extra:
                log.warning("%s: ignoring undeclared pools %s", self.name, sorted(extra))
        return HealthChange(fingerprint, previous_ok, ok, f"{health}: {detail}")

    async def _read(self) -> tuple[Fingerprint | None, str, bool, str]:
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


class Doubling:
    """A wait that doubles from ``initial_s`` up to ``max_s``, and starts over on reset."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.current = initial_s

    def next(self) -> float:
        wait = self.current
        self.current = min(self.current * 2, self.max_s)
        return wait

    def reset(self) -> None:
        self.current = self.initial_s


async def keep_fingerprinting(
    *,
    period_s: float,
    retry: Doubling,
    healthy: Callable[[], bool],
    trigger: asyncio.Event,
    clock: Clock,
    closing: Callable[[], bool],
    refresh: Callable[[], Awaitable[object]],
) -> None:
    """Fingerprint on the schedule in the module docstring until ``closing()``."""
    while not closing():
        if healthy():
            retry.reset()
            timeout = period_s
        else:
            timeout = retry.next()
        triggered = await wait_event(trigger, clock, timeout)
        trigger.clear()
        if triggered:
            retry.reset()
        if closing():
            return
        await refresh()
