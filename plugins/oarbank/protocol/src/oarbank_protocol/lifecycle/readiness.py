"""Waiting for a started (or adopted) service to say it is ready.

After ``start`` returns, the service is only *starting*: the spec's ``ready`` op is the gate
("the agent admits no job that depends on the service until ready returns true"). It is
polled every ``ready_poll_s`` until it says yes or the readiness deadline
(``ready_timeout_s``, kept apart from liveness because cold starts are slow) passes. Two
answers end the wait early or are refused:

* ``running: false`` several times in a row (``ready_not_running_grace``): the start said it
  succeeded, but nothing runs; waiting out the deadline would only delay the restart;
* ``ready: true`` with ``running: false`` contradicts itself: a protocol violation, reported
  once per start and not taken as ready.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from oarbank_protocol.errors import ExecError
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.lifecycle.clock import Clock
from oarbank_protocol.lifecycle.events import Emit
from oarbank_protocol.manifest import ServiceSpec


class ReadyOutcome(NamedTuple):
    ready: bool
    #: why not, when not ready
    why: str


class ReadinessGate:
    """Polls one service's ``ready`` op after a start."""

    def __init__(
        self,
        spec: ServiceSpec,
        ops: ServiceOps,
        *,
        clock: Clock,
        not_running_grace: int,
        emit: Emit,
    ) -> None:
        self.spec = spec
        self.ops = ops
        self.clock = clock
        self.not_running_grace = not_running_grace
        self.emit = emit

    async def wait(self, deadline: float | None, closing: Callable[[], bool]) -> ReadyOutcome:
        """Poll until ready, the deadline (default: ``ready_timeout_s`` from now), or
        ``closing()`` (the supervisor is shutting down)."""
        deadline = deadline or (self.clock.monotonic() + self.spec.ready_timeout_s)
        not_running = 0
        last = "no answer yet"
        violation_logged = False
        while not closing():
            try:
                status = await self.ops.ready()
            except ExecError as exc:
                last = exc.reason
            else:
                if status.ready and not status.running:
                    if not violation_logged:
                        violation_logged = True
                        self.emit(
                            "protocol_violation",
                            "ready said ready=true with running=false; not treating it as ready",
                        )
                elif status.ready:
                    return ReadyOutcome(True, "")
                last = status.detail or f"running={status.running}, ready={status.ready}"
                if not status.running:
                    not_running += 1
                    if not_running >= self.not_running_grace:
                        return ReadyOutcome(
                            False,
                            "start reported success but the service is not running "
                            f"(ready said running=false {not_running} times)",
                        )
                else:
                    not_running = 0
            now = self.clock.monotonic()
            if now >= deadline:
                return ReadyOutcome(
                    False,
                    f"readiness timeout after {self.spec.ready_timeout_s:g} s; last: {last}",
                )
            await self.clock.sleep(min(self.spec.ready_poll_s, deadline - now))
        return ReadyOutcome(False, "shutting down")
