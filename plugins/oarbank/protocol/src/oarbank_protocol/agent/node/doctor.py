"""Doctor runs of the node agent: every probe and service fingerprint of a module, now.

The spec runs probes "every period_s, and again after doctor-triggering events". Here
those events are an operator's request (``op: doctor``, SIGHUP), an admission refused for an
unavailable capability (the host may have been fixed since the last period), and a service
becoming ``unhealthy`` or ``failed``. Runs caused by events are debounced per module, and at
most one runs per module at a time, so a flapping service cannot keep its executables busy;
an operator's request always runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from oarbank_protocol.lifecycle.events import ManagerEvent
from oarbank_protocol.lifecycle.manager import ModuleManager

#: Doctor runs caused by events (not by an operator) are at most this frequent per module.
DOCTOR_DEBOUNCE_S = 2.0
#: Service events after which a module's capabilities are re-checked.
DOCTOR_EVENTS = frozenset({"unhealthy", "failed"})


class Doctor:
    """Schedules and runs doctor runs over the node's module managers."""

    def __init__(self, managers: Mapping[str, ModuleManager]) -> None:
        self.managers = managers
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._last: dict[str, float] = {}

    def on_event(self, module: str, event: ManagerEvent) -> None:
        """A manager's event sink: a service that gave up triggers a run of its module."""
        if event.kind in DOCTOR_EVENTS and event.subject in self.managers[module].services:
            self.schedule(module, f"{event.subject} became {event.kind}")

    def schedule(self, module: str, reason: str) -> None:
        """Run a doctor of ``module`` soon, unless one ran or is running within the debounce."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        running = self._tasks.get(module)
        if running is not None and not running.done():
            return
        if now - self._last.get(module, -1e9) < DOCTOR_DEBOUNCE_S:
            return
        self._last[module] = now

        async def run() -> None:
            await self.managers[module].doctor(reason)

        self._tasks[module] = loop.create_task(run(), name=f"oarbank:doctor:{module}")

    async def run_all(self, reason: str = "requested") -> dict[str, Any]:
        """Re-check every module now; every capability as ``module/name``, with why it is (not)
        available."""
        reports = await asyncio.gather(
            *(m.doctor(reason) for m in self.managers.values()), return_exceptions=False
        )
        out: dict[str, Any] = {}
        for module, report in zip(self.managers, reports, strict=True):
            for name, cap in report.items():
                out[f"{module}/{name}"] = asdict(cap)
        return out

    async def cancel(self) -> None:
        """Stop scheduled runs (the agent is shutting down)."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
