"""What the runtime keeps about a running plan: its options, one record per unit and per
instance, and the failure that ends a phase.

The orchestrator owns these records; the source builds and the shutdown coordinator read
and update them through what they are handed, so none of the three imports another.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from srt_services.contracts.handle import Handle
from srt_services.contracts.plan import PlannedInstance, PlannedUnit
from srt_services.jobdir.cause import StopCause, death_signal
from srt_services.jobdir.state import InstanceStatus
from srt_services.supervise.restart import RestartTracker


class Emit(Protocol):
    """Writes one event to ``events.jsonl`` (fields that are ``None`` are left out)."""

    def __call__(self, event: str, /, **fields: Any) -> None: ...


class PhaseFailed(Exception):
    """A phase cannot go on; ``cause`` is what ends the job (its message is the text)."""

    def __init__(self, cause: StopCause) -> None:
        super().__init__(cause.message)
        self.cause = cause


@dataclass(slots=True)
class RunOptions:
    cookie: str
    site_passthrough: tuple[str, ...] = ()
    grace_override: float | None = None
    on_event: Callable[[dict[str, Any]], None] | None = None
    #: a file holding space set aside for the last writes, removed if the disk fills up
    reserve: str | None = None


@dataclass(eq=False, slots=True)
class InstanceRun:
    planned: PlannedInstance
    unit: UnitRun
    handle: Handle | None = None
    state: InstanceStatus = "pending"
    attempt: int = 0
    restarts: int = 0
    exit_code: int | None = None
    exit_fut: asyncio.Future[int] | None = None
    ready_at: float | None = None
    waiting_since: float | None = None
    liveness: asyncio.Task[None] | None = None
    #: why srt itself stopped this attempt (a liveness failure, a timeout), for the report
    killed_for: str | None = None
    #: where the files the probes follow stood when this attempt was launched
    probe_starts: dict[str, tuple[int | None, int]] = field(default_factory=dict)
    #: set while srt stops it on request (``srt restart``, ``srt stop JOBDIR SERVICE``): its
    #: exit is expected, so neither the restart policy nor a critical unit's rule applies
    held: str | None = None

    @property
    def step(self) -> str:
        return self.planned.step

    @property
    def running(self) -> bool:
        return self.handle is not None and self.handle.returncode is None

    @property
    def label(self) -> str:
        """How messages name the instance: ``services[x] (service_x_0)``, ``worker w_0``..."""
        u = self.unit.planned
        if u.category == "service":
            return f"services[{u.name}] ({self.step})"
        if u.category == "workers":
            return f"worker {self.step}"
        return u.category


@dataclass(eq=False, slots=True)
class UnitRun:
    planned: PlannedUnit
    instances: list[InstanceRun] = field(default_factory=list)
    tracker: RestartTracker | None = None
    #: its first start is done (every instance ready): from then on it may be restarted
    started: bool = False

    @property
    def name(self) -> str:
        return self.planned.name


def describe_code(code: int) -> str:
    """``exit code 3`` or ``killed by signal 9 (SIGKILL)``."""
    sig = death_signal(code)
    if sig is None:
        return f"exit code {code}"
    try:
        return f"killed by signal {sig} ({signal.Signals(sig).name})"
    except ValueError:
        return f"killed by signal {sig}"
