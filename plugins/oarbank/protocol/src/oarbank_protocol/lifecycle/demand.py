"""Who wants a service now, and so whether it should run: the spec's lifecycles.

* ``always``: wanted while the module is enabled, unless it yielded its memory;
* ``on_demand``: wanted while admitted attempts use it (a reference count: one user per
  attempt, a second admission or release of the same attempt changes nothing), and for
  ``idle_timeout_s`` after the last one leaves;
* ``manual``: never started or stopped by the agent.

A yield (the agent stops an idle ``yieldable`` service to make room in memory) ends when an
attempt needs the service again or the agent hands the memory back.
"""

from __future__ import annotations

from oarbank_protocol.lifecycle.clock import Clock
from oarbank_protocol.manifest import ServiceSpec


class Demand:
    """The users of one service, its idle timer and whether it was asked to yield."""

    def __init__(self, spec: ServiceSpec, clock: Clock) -> None:
        self.spec = spec
        self.clock = clock
        #: attempt id -> when it started using the service
        self.users: dict[str, float] = {}
        self.idle_since: float | None = None
        self.yield_requested = False

    def add(self, attempt_id: str) -> bool:
        """An attempt uses the service (a yield ends); True when it was not a user yet."""
        added = attempt_id not in self.users
        self.users[attempt_id] = self.clock.monotonic()
        self.idle_since = None
        self.yield_requested = False
        return added

    def remove(self, attempt_id: str) -> bool:
        """An attempt is done with it; False when it was not a user (never negative)."""
        if self.users.pop(attempt_id, None) is None:
            return False
        if not self.users:
            self.idle_since = self.clock.monotonic()
        return True

    def ready_at(self, now: float) -> None:
        """The service became ready: with nobody using it, the idle timer starts now."""
        if not self.users:
            self.idle_since = now

    def idle_deadline(self) -> float | None:
        """When an unused on_demand service stops (``None``: not idle, or not on_demand)."""
        if self.spec.lifecycle != "on_demand" or self.users:
            return None
        if self.idle_since is None:
            self.idle_since = self.clock.monotonic()
        return self.idle_since + self.spec.idle_timeout_s

    def wants_start(self) -> bool:
        if self.spec.lifecycle == "manual":
            return False
        if self.spec.lifecycle == "always":
            return not self.yield_requested
        return bool(self.users)

    def wants_running(self) -> bool:
        if self.yield_requested:
            return False
        if self.spec.lifecycle == "always" or self.users:
            return True
        deadline = self.idle_deadline()
        return deadline is not None and self.clock.monotonic() < deadline

    def may_yield(self, *, ready: bool) -> bool:
        """Whether the service may be stopped for memory now: yieldable, ready, unused."""
        return self.spec.yieldable and self.spec.lifecycle != "manual" and ready and not self.users
