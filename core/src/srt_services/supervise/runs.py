"""What the runtime keeps about a running plan: its options, one record per unit and per
instance, the job's own record (:class:`JobRun`), and the failure that ends a phase.

The orchestrator owns these records; its collaborators (the journal, launching, exits,
restarts, readiness, builds, the shutdown) read and update them through what they are
handed, so none of them imports another's module or the orchestrator's.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from srt_services.contracts.handle import Handle
from srt_services.contracts.plan import Plan, PlannedInstance, PlannedUnit
from srt_services.jobdir.cause import StopCause, StopKind, death_signal
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
    #: after the job's end, absorb stop signals until the process exits (``srt run``:
    #: its exit status is the job's); otherwise the dispositions from before come back
    absorb_late_stops: bool = False


@dataclass(eq=False, slots=True)
class InstanceRun:
    planned: PlannedInstance
    unit: UnitRun
    handle: Handle | None = None
    state: InstanceStatus = "pending"
    #: why the instance is ``unavailable`` (its node lacks what it runs), else ``None``
    unavailable: str | None = None
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


@dataclass(eq=False, slots=True)
class JobRun:
    """The running job as its collaborators share it: its units and instances, where it
    stands, and how it ends. Only the orchestrator decides the end (the first stop cause
    wins); the others read it."""

    plan: Plan
    units: dict[str, UnitRun]
    instances: list[InstanceRun]
    #: the phase being started, then ``serving``
    phase: str | None = None
    stopping: bool = False
    stop_cause: StopCause | None = None
    exit_code: int | None = None
    #: processes that outlived SIGKILL, as the teardown reported them
    unkillable: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, plan: Plan) -> JobRun:
        units: dict[str, UnitRun] = {}
        for u in plan.units:
            run = UnitRun(u)
            run.instances = [InstanceRun(i, run) for i in u.instances]
            units[u.name] = run
        return cls(plan, units, [i for u in units.values() for i in u.instances])

    @property
    def by_user(self) -> bool:
        """The job was stopped by its user (``srt stop``, Ctrl-C through ``srt stop``)."""
        return self.stop_cause is not None and self.stop_cause.kind is StopKind.USER_STOP


class RequestStop(Protocol):
    """Ends the job with ``cause``; the first cause wins, and ``code`` with it."""

    def __call__(self, cause: StopCause, code: int) -> None: ...


def describe_code(code: int) -> str:
    """``exit code 3`` or ``killed by signal 9 (SIGKILL)``."""
    sig = death_signal(code)
    if sig is None:
        return f"exit code {code}"
    try:
        return f"killed by signal {sig} ({signal.Signals(sig).name})"
    except ValueError:
        return f"killed by signal {sig}"
