"""Watching a ready service with ``status``: is it still running?

A ready service is asked ``status`` every ``status_period_s``. ``running: false`` means it
exited behind the agent's back. A failing ``status`` is not proof of death (the executable
may be slow or briefly broken), so only ``status_failure_threshold`` consecutive failures
count, as one failure of the service; any answer resets the count.
"""

from __future__ import annotations

from oarbank_protocol.errors import ExecError
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.lifecycle.clock import Clock
from oarbank_protocol.manifest import ServiceSpec


class StatusWatch:
    """When the next ``status`` is due, and what the answers so far add up to."""

    def __init__(
        self, spec: ServiceSpec, ops: ServiceOps, *, clock: Clock, failure_threshold: int
    ) -> None:
        self.spec = spec
        self.ops = ops
        self.clock = clock
        self.failure_threshold = failure_threshold
        self.errors = 0
        #: The ``clock`` time the next check is due.
        self.next_at = 0.0

    def restart(self, now: float) -> None:
        """The service just became ready: the first check is a period away, errors forgotten."""
        self.next_at = now + self.spec.status_period_s
        self.errors = 0

    async def check(self) -> str | None:
        """Ask ``status`` once; the failure to act on (why), or ``None`` while it runs."""
        try:
            status = await self.ops.status()
        except ExecError as exc:
            self.errors += 1
            self.next_at = self.clock.monotonic() + self.spec.status_period_s
            if self.errors < self.failure_threshold:
                return None
            return f"status failed {self.errors} times; last: {exc.reason}"
        self.errors = 0
        self.next_at = self.clock.monotonic() + self.spec.status_period_s
        if status.running:
            return None
        return "service exited unexpectedly (status says running=false)"
