"""The part of ``plan.json`` a process outside the job needs: which step stops in which
tier, and with which grace (and the job's name, for ``srt status`` before it started).

``srt stop`` after a dead orchestrator stops the leftovers tier by tier like the
orchestrator would have; it needs nothing else from the plan, so nothing else is read
(the plan model itself belongs to the planner, above this layer).
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


@dataclass(slots=True)
class PlannedStop:
    """How one unit stops."""

    tier: Count
    stop_grace: Annotated[FiniteFloat, Field(ge=0)] = DEFAULT_GRACE
    instances: list[PlannedStep] = field(default_factory=list)


@dataclass(slots=True)
class PlanView:
    job_name: str | None = None
    units: list[PlannedStop] = field(default_factory=list)

    def tiers(self) -> dict[str, int]:
        """step -> shutdown tier."""
        return {i.step: u.tier for u in self.units for i in u.instances}

    def graces(self) -> dict[str, float]:
        """step -> seconds between SIGTERM and SIGKILL."""
        return {i.step: u.stop_grace for u in self.units for i in u.instances}


def read_plan_view(job: JobDir) -> PlanView | None:
    return reading.read(PlanView, job.plan_file, "a valid plan")
