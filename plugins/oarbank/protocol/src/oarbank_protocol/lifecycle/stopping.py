"""Stopping a service through the protocol, and checking that it stopped (fault row P11).

``stop`` exiting 0 is the module's claim; ``status`` afterwards is the check. A stop that
fails, times out, or "succeeds" while ``status`` still says running escalates: every owned
object labelled for this node and service is destroyed with ``--force`` (several at a
time, within one budget for all), then ``status`` is asked again. Whatever the outcome, the
caller learns how it went (:class:`StopOutcome`); an agent reports a stop that was not what
it claimed even when the escalation cleaned up after it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from oarbank_protocol.documents import LABEL_NODE, LABEL_SERVICE
from oarbank_protocol.errors import ExecError
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.lifecycle.events import Emit
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.names import is_object_id


@dataclass
class StopOutcome:
    """How the last stop went; an agent reports a stop that was not what it claimed."""

    stopped: bool
    escalated: bool = False
    reason: str = ""
    leftovers: list[str] = field(default_factory=list)
    #: ``stop`` exited 0 but ``status`` still said running afterwards.
    claimed_but_running: bool = False


class StopEscalation:
    """Stops one service: ``stop``, checked by ``status``, escalated when it did not work."""

    def __init__(
        self,
        name: str,
        ops: ServiceOps,
        *,
        node_id: str,
        options: SupervisorOptions,
        emit: Emit,
    ) -> None:
        self.name = name
        self.ops = ops
        self.node_id = node_id
        self.options = options
        self.emit = emit

    async def stop(self) -> StopOutcome:
        try:
            result = await self.ops.stop()
        except ExecError as exc:
            return await self._escalate(exc.reason, claimed=False)
        # Exit 0 is the module's claim; status is the check. A stop that "succeeds" while
        # the service keeps running takes the same escalation as a stop that failed.
        if not await self._still_running():
            return StopOutcome(True, escalated=result.escalated)
        first = "stop exited 0 but status still says running"
        self.emit("protocol_violation", first)
        return await self._escalate(first, claimed=True)

    async def _still_running(self) -> bool:
        """Whether ``status`` says the service runs; unknown (status failing) counts as no."""
        try:
            status = await self.ops.status()
        except ExecError as exc:
            self.emit("stop_unverified", f"status after stop failed: {exc.reason}")
            return False
        return status.running

    async def _escalate(self, first: str, *, claimed: bool) -> StopOutcome:
        """After a failed (or untrue) stop: destroy our owned objects with ``--force``, then
        check with ``status`` that the service is gone."""
        self.emit("stop_escalated", f"{first}; destroying owned objects with --force")
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
