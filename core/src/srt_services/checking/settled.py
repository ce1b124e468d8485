"""What the checks decide about a recipe: the records the planner builds the plan from.

The checks settle every service's effective values and bind every readiness and liveness
block to its probe and validated config, so the planner never re-derives a value and never
looks a binding up: each record carries its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srt_services.checking.effective import EffectiveService
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.probe import Probe
    from srt_services.recipe.models import ProbeBlock, ServiceSpec


@dataclass(slots=True)
class ProbeBinding:
    """A readiness or liveness block bound to the probe it names and that probe's config.

    The config is validated once, by the checks; ``block`` is kept for its timing fields
    (timeouts, intervals, liveness periods), which the planner copies into the plan.
    """

    probe: Probe
    #: the probe's ``Config`` model, validated (shared between equal blocks, never mutated)
    config: Any
    block: ProbeBlock


@dataclass(slots=True)
class JobProbes:
    """The bound readiness blocks of the job's own processes (services carry their own)."""

    frontend: ProbeBinding | None = None
    #: role name -> its workers' readiness, for the roles that declare one
    roles: dict[str, ProbeBinding] = field(default_factory=dict)


@dataclass(slots=True)
class Settled:
    """A service with everything decided: what the planner consumes."""

    eff: EffectiveService
    kind: ServiceKind
    options: Any
    placement: str
    pool: str | None
    per: str
    start: str
    critical: bool
    stop_grace: float
    #: ``eff.spec`` and its name, as fields: the planner reads them a dozen times per service
    spec: ServiceSpec
    name: str
    #: ``spec.readiness`` / ``spec.liveness`` bound to their probes (``None`` when not written)
    readiness: ProbeBinding | None = None
    liveness: ProbeBinding | None = None
    #: a written ``readiness`` with timing only (no probe): it tunes the kind's default
    readiness_timing: ProbeBlock | None = None


class UnboundProbe(RuntimeError):
    """A probe block reached the planner without the binding the checks make for it.

    Always a bug in srt (a check that neither bound a block nor reported a problem), never
    a reason to plan the instance without its probe.
    """


def bound(
    block: ProbeBlock | None, binding: ProbeBinding | None, owner: str, what: str
) -> ProbeBinding | None:
    """``binding``, after making sure that a written ``block`` (``owner``'s ``what``) has one."""
    if binding is None and block is not None:
        raise UnboundProbe(f"{owner}.{what}: the recipe's probe block was never bound to a probe")
    return binding
