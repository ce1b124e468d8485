"""An instance's readiness and liveness probes, as the plan records them.

The probe is the one the recipe's block was bound to by the checks (a
:class:`~srt_services.checking.settled.ProbeBinding`), or else the one the kind asks for by
default. The probe plugin fills in what the instance decides (its address, a rendered
path), and the recipe's timing, or the defaults, go with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.contracts.context import PathOutsideJob
from srt_services.contracts.plan import PlannedProbe
from srt_services.recipe.problems import Problem

if TYPE_CHECKING:
    from srt_services.checking.settled import ProbeBinding
    from srt_services.contracts.context import InstanceContext
    from srt_services.contracts.kind import DefaultProbe
    from srt_services.plan.context import PlanContext
    from srt_services.recipe.models import ProbeBlock
    from srt_services.recipe.problems import Path

DEFAULT_TIMEOUT = 120.0
DEFAULT_INTERVAL = 2.0


def planned_probe(
    ctx: PlanContext,
    binding: ProbeBinding | None,
    default: DefaultProbe | None,
    ictx: InstanceContext,
    default_port: int | None,
    default_timeout: float,
    default_interval: float,
    liveness: bool = False,
    at: Path = (),
    timing: ProbeBlock | None = None,
) -> PlannedProbe | None:
    """The probe of one instance: the recipe's (``binding``), else the kind's ``default``.

    ``timing`` is a written block without a probe: its timeout and interval replace the
    default probe's. ``at`` is where the block is written (``services[0].readiness``), for a problem the
    probe finds while it renders itself for this instance (a path leaving the job
    directory); the problem is reported once per service, not once per instance.
    """
    if binding is not None:
        probe, config, block = binding.probe, binding.config, binding.block
        timeout = block.timeout_seconds or _least(ctx, DEFAULT_TIMEOUT, liveness)
        interval = block.interval_seconds or DEFAULT_INTERVAL
    elif default is not None:
        probe = ctx.plugins.probe(default.name)
        config = probe.Config.model_validate(default.config)
        timeout = _least(ctx, default.timeout or default_timeout, liveness)
        interval = default.interval or default_interval
        if timing is not None:
            timeout = timing.timeout_seconds or timeout
            interval = timing.interval_seconds or interval
    else:
        return None
    try:
        planned = probe.plan(config, ictx, default_port)
    except PathOutsideJob as exc:
        problem = Problem((*at, probe.name, "path") if binding is not None else at, str(exc))
        if problem not in ctx.problems:
            ctx.problems.append(problem)
        return None
    result = PlannedProbe(
        probe=probe.name,
        config=planned,
        timeout=timeout,
        interval=interval,
        describe=probe.describe(planned),
    )
    if liveness and binding is not None:
        result.period = getattr(binding.block, "period_seconds", None)
        result.failure_threshold = getattr(binding.block, "failure_threshold", None)
        result.attempt_timeout = getattr(binding.block, "attempt_timeout_seconds", None)
    port = probe.port(config) if probe.uses_port else None
    if probe.uses_port and port is None:
        port = default_port
    if port is not None:
        result.config.setdefault("port", port)
    return result


def _least(ctx: PlanContext, default: float, liveness: bool) -> float:
    """A default readiness budget, raised to the site's least one (liveness has none)."""
    return default if liveness else max(default, ctx.readiness_floor)
