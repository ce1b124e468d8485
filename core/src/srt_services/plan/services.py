"""A service's unit: its instances over the nodes or workers its placement selects.

The unit's own record (phase, tier, restart, metrics, the build of a service built from
source) is made here; its instances by :class:`srt_services.plan.instances.Instances`,
which works out once per service what is the same for every instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.contracts.plan import (
    LAST_TIER,
    TIER_OF_PHASE,
    PlannedBuild,
    PlannedRestart,
    PlannedUnit,
)
from srt_services.plan.instances import Instances, src_dir
from srt_services.plan.probes import planned_probe
from srt_services.plan.targets import metric_record
from srt_services.plan.values import instance_values, render_all
from srt_services.recipe.problems import Problem

if TYPE_CHECKING:
    from srt_services.checking.settled import Settled
    from srt_services.contracts.context import InstanceContext, Node
    from srt_services.contracts.expansion import InstanceSeed
    from srt_services.contracts.plan import PlannedProbe
    from srt_services.plan.context import PlanContext
    from srt_services.plan.values import OwnNodes
    from srt_services.recipe.models import RestartSpec


def service_unit(ctx: PlanContext, s: Settled, discovery: dict[str, str]) -> PlannedUnit | None:
    """The unit of a settled service; ``None`` when its placement selects nothing here
    (a problem for a written service, a warning for an implied one)."""
    unit = _unit_record(s)
    if s.spec.external is not None:
        return unit
    nodes = service_nodes(ctx, s)
    seeds = _seeds(ctx, s, nodes)
    if not seeds:
        _nothing_selected(ctx, s)
        return None
    unit.nodes = (
        [seeds[0].node.name]
        if len(seeds) == 1
        else list(dict.fromkeys([seed.node.name for seed in seeds]))
    )
    spec = s.spec
    if not s.critical and not spec.terminal:
        unit.restart = ctx.default_restart if spec.restart is None else restart_record(spec.restart)
    metrics = spec.metrics or s.kind.metrics(spec, s.options)
    if metrics:
        unit.metrics = [metric_record(m) for m in metrics]
    plan = Instances(ctx, s, unit, nodes, metrics, discovery)
    unit.instances = [plan.instance(index, seed) for index, seed in enumerate(seeds)]
    unit.container = unit.instances[0].container
    if plan.fleet_contexts:
        unit.fleet = _fleet(ctx, s, plan.fleet_contexts)
    if spec.source is not None:
        unit.build = _build(ctx, s, unit, seeds[0], plan.own)
    return unit


def _fleet(ctx: PlanContext, s: Settled, contexts: list[InstanceContext]) -> PlannedProbe | None:
    """The kind's probe over the whole service, rendered with its first instance's values."""
    kind = s.kind
    default = kind.fleet_readiness(s.spec, s.options, contexts)
    if default is None:
        return None
    return planned_probe(
        ctx,
        None,
        default,
        contexts[0],
        None,
        kind.default_readiness_timeout,
        kind.default_readiness_interval,
    )


def _unit_record(s: Settled) -> PlannedUnit:
    """The unit with everything but its instances (all an external service has)."""
    spec = s.spec
    placement = s.placement
    return PlannedUnit(
        name=s.name,
        category="service",
        type=spec.type,
        phase=s.start,
        tier=LAST_TIER if s.kind.stops_last else TIER_OF_PHASE[s.start],
        critical=s.critical,
        terminal=spec.terminal,
        stop_grace=s.stop_grace,
        instances=[],
        placement=placement,
        per=s.per,
        pool=s.pool if placement == "pool" or spec.nodes else None,
        implied_by=s.eff.implied_by,
        replaces_implied=s.eff.replaces_implied,
        after=spec.after,
        external=spec.external,
        options=spec.options,
        inherit_discovery_env=spec.inherit_discovery_env and not s.kind.is_discovery_plane,
    )


def service_nodes(ctx: PlanContext, s: Settled) -> tuple[Node, ...]:
    """The nodes a service's placement (or pool) selects in this layout."""
    if s.placement == "pool":
        return tuple(ctx.layout.pools.get(s.pool or "", ()))
    placement = ctx.plugins.placement(s.placement)
    return placement.nodes(ctx.layout, s.pool)


def _seeds(ctx: PlanContext, s: Settled, nodes: tuple[Node, ...]) -> list[InstanceSeed]:
    """One seed per instance: the service's expansion (``per``) over its nodes."""
    if not nodes:
        return []
    placement = s.placement
    worker_roles = ctx.plugins.placement(placement).worker_roles if placement != "pool" else None
    return ctx.plugins.expansion(s.per).seeds(s.name, nodes, ctx.layout, worker_roles)


def _nothing_selected(ctx: PlanContext, s: Settled) -> None:
    what = "workers" if s.per == "worker" else "nodes"
    message = f"placement {s.placement} selects no {what} in this job"
    if s.eff.path is None:
        ctx.warnings.append(
            f"services[{s.name}] (implied by {s.eff.implied_by}): {message}; skipped"
        )
        return
    ctx.problems.append(Problem((*s.eff.label_path, "placement"), message))


def restart_record(spec: RestartSpec) -> PlannedRestart | None:
    """The plan's restart record of a spec (``None``: never restarted)."""
    if spec.policy == "no":
        return None
    return PlannedRestart(
        policy=spec.policy,
        backoff_initial=spec.backoff_initial_seconds,
        backoff_max=spec.backoff_max_seconds,
        max_failures=spec.max_failures,
        window=spec.failure_window_seconds,
        reset_after=spec.reset_after,
        jitter=spec.jitter,
    )


def _build(
    ctx: PlanContext, s: Settled, unit: PlannedUnit, first: InstanceSeed, own: OwnNodes
) -> PlannedBuild:
    """Clone and build the service's source once per node, as its first instance sees it."""
    spec = s.spec
    source = spec.source
    assert source is not None
    values = instance_values(
        ctx, first.node, 0, s.placement, own, first.step, first.worker, first.worker_node_rank
    )
    return PlannedBuild(
        git=source.git,
        checkout=source.checkout,
        rev=source.rev,
        src_dir=src_dir(ctx, s),
        path=source.path,
        build_command=render_all(spec.build_command, values) or None,
        timeout=spec.build_timeout_seconds,
        nodes=list(unit.nodes),
        env=dict(unit.instances[0].env),
        scope=spec.build_scope,
    )
