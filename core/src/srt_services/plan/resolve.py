"""``resolve``: a checked recipe plus an allocation to a :class:`Plan`.

Pure: no processes, no network, no clock. The same inputs give the same plan, which is why
``srt dry-run --json`` output can be compared byte for byte in tests.

The parts: :mod:`.layout` carves the allocation into head, infra, workers and pools;
:mod:`.services` plans each service's unit and :mod:`.processes` the workers, frontend and
benchmark, with the placeholder values of :mod:`.values` and the probes of :mod:`.probes`;
the port ledger (:mod:`.ports`) refuses two listeners on one port of a node.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from srt_services.extend.context import JobPaths, Layout, Node
from srt_services.extend.kind import ServiceKind
from srt_services.plan import layout as layout_mod
from srt_services.plan.allocation import Allocation, AllocationRequest
from srt_services.plan.context import PlanContext
from srt_services.plan.model import (
    PHASE_ORDER,
    PLAN_VERSION,
    Plan,
    PlannedNode,
    PlannedUnit,
    ScrapeTarget,
)
from srt_services.plan.ports import PortLedger
from srt_services.plan.processes import benchmark_unit, frontend_unit, worker_unit
from srt_services.plan.services import restart_record, service_nodes, service_unit
from srt_services.plan.values import job_values
from srt_services.recipe.models import MAX_NODES, RestartSpec
from srt_services.recipe.problems import Problem, RecipeError, locate
from srt_services.recipe.source import gc_paused

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.load import LoadedRecipe

AllocationSource = AllocationRequest | Allocation | Callable[[int], Allocation]


def resolve(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    request: AllocationRequest | Allocation | Callable[[int], Allocation],
    job_dir: str = "<job_dir>",
    recipe_dir: str | None = None,
    readiness_timeout: float | None = None,
    local_root: str = "/tmp",
) -> Plan:
    """Build the plan; plan-level problems (ports, nodes) raise :class:`RecipeError`.

    ``recipe_dir`` is what ``{recipe_dir}`` renders to (default: the recipe file's
    directory; ``srt apply`` keeps the original one for the staged copy).
    ``readiness_timeout`` is the site's ``readiness.timeout_seconds``: a default readiness
    budget below it is raised to it (a value the recipe writes is kept as written).
    ``local_root`` is the node-local storage root under which ``{local_dir}`` lives."""
    with gc_paused():
        return _resolve(
            loaded, plugins, request, job_dir, recipe_dir, readiness_timeout or 0.0, local_root
        )


def _resolve(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    request: AllocationSource,
    job_dir: str,
    recipe_dir: str | None,
    readiness_floor: float,
    local_root: str,
) -> Plan:
    allocation, lay = _allocate(loaded, plugins, request)
    paths = JobPaths(job_dir=job_dir, job_id=allocation.job_id, local_root=local_root)
    ctx = PlanContext(
        loaded,
        plugins,
        lay,
        paths,
        job_values(
            loaded, lay, paths, recipe_dir or os.path.dirname(os.path.abspath(loaded.source))
        ),
        PortLedger(),
        node_ids={n.name: i for i, n in enumerate(lay.compute)},
        default_restart=restart_record(RestartSpec()),
        readiness_floor=readiness_floor,
    )
    discovery = _discovery_env(ctx)
    units, phases = _units(ctx, discovery)
    ctx.problems.extend(ctx.ledger.problems())
    if ctx.problems:
        raise _recipe_error(loaded, ctx.problems)
    return Plan(
        version=PLAN_VERSION,
        job_name=loaded.recipe.name,
        job_id=allocation.job_id,
        job_dir=job_dir,
        allocation=allocation.kind,
        nodes=_planned_nodes(lay),
        head=lay.head.name,
        infra=lay.infra.name,
        client=lay.client.name,
        units=units,
        phases=phases,
        discovery_env=discovery,
        ports=ctx.ledger.entries(),
        scrape_targets=_scrape_targets(ctx),
        warnings=ctx.warnings,
        local_dir=paths.local_job_dir,
    )


def _recipe_error(loaded: LoadedRecipe, problems: Iterable[Problem]) -> RecipeError:
    doc = loaded.document
    return RecipeError(doc.source, locate(problems, doc.source, doc.data, doc.mark_of))


def _allocate(
    loaded: LoadedRecipe, plugins: PluginSet, request: AllocationSource
) -> tuple[Allocation, Layout]:
    """The allocation the recipe needs, carved into head, infra, workers and pools."""
    recipe = loaded.recipe
    # each distinct placement asked once, not once per service
    placed = {s.placement for s in loaded.services if s.spec.external is None} - {"pool"}
    dedicated = any(
        plugins.has("placement", p) and plugins.placement(p).reserves_infra_node
        for p in sorted(placed)
    )
    pools = [(s.name, s.spec.nodes) for s in loaded.services if s.spec.nodes is not None]
    needs = layout_mod.needs_of(recipe, dedicated, pools)
    if needs.total > MAX_NODES:
        problem = Problem(
            (),
            f"the recipe needs {needs.total} nodes ({needs.describe()});"
            f" srt plans at most {MAX_NODES}",
        )
        raise _recipe_error(loaded, [problem])
    if isinstance(request, AllocationRequest):
        allocation = request.build(needs.total)
    elif isinstance(request, Allocation):
        allocation = request
    else:
        allocation = request(needs.total)
    ports: dict[str, int | None] = {name: spec.port for name, spec in recipe.roles.items()}
    try:
        lay = layout_mod.carve(list(allocation.nodes), needs, recipe.resources.gpus_per_node, ports)
    except layout_mod.AllocationTooSmall as exc:
        raise _recipe_error(loaded, [Problem((), str(exc))]) from None
    return allocation, lay


def _units(
    ctx: PlanContext, discovery: dict[str, str]
) -> tuple[list[PlannedUnit], dict[str, list[str]]]:
    """Every unit in launch order within its phase, and each phase's unit names."""
    recipe = ctx.loaded.recipe
    units: list[PlannedUnit] = []
    phases: dict[str, list[str]] = {p: [] for p in PHASE_ORDER}

    def add(unit: PlannedUnit) -> None:
        units.append(unit)
        phases[unit.phase].append(unit.name)

    for settled in ctx.loaded.services:
        unit = service_unit(ctx, settled, discovery)
        if unit is not None:
            add(unit)
    for role, spec in recipe.roles.items():
        add(worker_unit(ctx, role, spec, discovery))
    if recipe.frontend is not None and recipe.frontend.type != "none":
        add(frontend_unit(ctx, discovery))
    if recipe.benchmark.type == "command":
        add(benchmark_unit(ctx, units, discovery))
    return units, phases


def _planned_nodes(lay: Layout) -> list[PlannedNode]:
    roles: dict[str, list[str]] = {n.name: [] for n in lay.nodes}

    def tag(node: Node, what: str) -> None:
        if what not in roles[node.name]:
            roles[node.name].append(what)

    tag(lay.head, "head")
    tag(lay.infra, "infra" if not lay.dedicated_infra else "dedicated-infra")
    tag(lay.client, "client")
    for role, nodes in lay.role_nodes.items():
        for n in nodes:
            tag(n, role)
    for pool, nodes in lay.pools.items():
        for n in nodes:
            tag(n, f"pool:{pool}")
    return [PlannedNode(n.name, n.ip, roles[n.name]) for n in lay.nodes if roles[n.name]]


def _discovery_env(ctx: PlanContext) -> dict[str, str]:
    """What the discovery services (etcd, NATS) announce to consumers, by env variable."""
    env: dict[str, str] = {}
    for s in ctx.loaded.services:
        if s.options is None or type(s.kind).discovery_env is ServiceKind.discovery_env:
            continue  # most kinds have nothing to announce: skip finding their nodes
        address: str | None = None
        if s.spec.external is None:
            nodes = service_nodes(ctx, s)
            if not nodes:
                continue
            address = nodes[0].ip
        env.update(s.kind.discovery_env(s.spec, s.options, address))
    return env


def _scrape_targets(ctx: PlanContext) -> list[ScrapeTarget]:
    """Every metrics endpoint of the job, one per node it is served on; none when the
    recipe switches metrics off (``observability.metrics: false``: nothing scrapes them)."""
    if not ctx.loaded.recipe.observability.metrics:
        return []
    return ctx.targets
