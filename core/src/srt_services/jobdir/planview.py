"""The part of ``plan.json`` a process outside the job needs: which step stops in which
tier, and with which grace (and the job's name, for ``srt status`` before it started);
which units and instances there are and where their logs go (``srt logs``); how many nodes
(``srt ps``).

``srt stop`` after a dead orchestrator stops the leftovers tier by tier like the
orchestrator would have. Nothing else is read (the plan model itself belongs to the
planner, above this layer); fields added here have defaults, so older plans still read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field, FiniteFloat

from srt_services.jobdir import reading
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.state import Count

#: The grace a step gets when its plan does not say (the recipe's default).
DEFAULT_GRACE = 30.0


@dataclass(slots=True)
class PlannedStep:
    step: str
    node: str = ""
    #: relative to the job directory
    log: str = ""
    #: the worker it belongs to (``decode_0`` for ``decode_0_node1``)
    worker: str | None = None


@dataclass(slots=True)
class PlannedStop:
    """How one unit stops (and what it is)."""

    tier: Count
    stop_grace: Annotated[FiniteFloat, Field(ge=0)] = DEFAULT_GRACE
    instances: list[PlannedStep] = field(default_factory=list)
    name: str = ""
    #: service | workers | frontend | benchmark
    category: str = ""


@dataclass(slots=True)
class PlannedNode:
    name: str


@dataclass(slots=True)
class PlanView:
    job_name: str | None = None
    units: list[PlannedStop] = field(default_factory=list)
    nodes: list[PlannedNode] = field(default_factory=list)

    def tiers(self) -> dict[str, int]:
        """step -> shutdown tier."""
        return {i.step: u.tier for u in self.units for i in u.instances}

    def graces(self) -> dict[str, float]:
        """step -> seconds between SIGTERM and SIGKILL."""
        return {i.step: u.stop_grace for u in self.units for i in u.instances}


def read_plan_view(job: JobDir) -> PlanView | None:
    return reading.read(PlanView, job.plan_file, "a valid plan")
