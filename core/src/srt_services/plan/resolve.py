"""``resolve``: a checked recipe plus an allocation to a :class:`Plan`.

Pure: no processes, no network, no clock. The same inputs give the same plan, which is why
``srt dry-run --json`` output can be compared byte for byte in tests.

The parts: :mod:`.layout` carves the allocation into head, infra, workers and pools;
:mod:`.services` plans each service's unit and :mod:`.processes` the workers, frontend and
benchmark, with the placeholder values of :mod:`.values` and the probes of :mod:`.probes`;
the port ledger (:mod:`.ports`) refuses two listeners on one port of a node.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from srt_services.contracts.allocation import Allocation
from srt_services.contracts.context import JobPaths, Layout, Node
from srt_services.contracts.kind import ServiceKind
from srt_services.contracts.launcher import LAUNCH_SETTINGS
from srt_services.contracts.plan import (
    PHASE_ORDER,
    PLAN_VERSION,
    LocalNetwork,
    Plan,
    PlannedNode,
    PlannedUnit,
    ScrapeTarget,
)
from srt_services.gcpause import gc_paused
from srt_services.plan import launch_paths, netmode
from srt_services.plan import layout as layout_mod
from srt_services.plan.context import PlanContext
from srt_services.plan.layout import NodeNeeds
from srt_services.plan.ports import PortLedger
from srt_services.plan.processes import benchmark_unit, frontend_units, worker_unit
from srt_services.plan.services import restart_record, service_nodes, service_unit
from srt_services.plan.settings import PlanSettings
from srt_services.plan.uses import apply_uses
from srt_services.plan.values import job_values, kind_placeholders
from srt_services.recipe.models import MAX_NODES, RestartSpec
from srt_services.recipe.placeholders import render
from srt_services.recipe.problems import Problem, RecipeError, locate

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.checking.settled import Settled
    from srt_services.contracts.launcher import Launcher
    from srt_services.plugins.manager import PluginSet


def node_needs(loaded: LoadedRecipe, plugins: PluginSet) -> NodeNeeds:
    """What the recipe asks of the allocation: the application layer asks the launcher for
    that many nodes before planning, so planning itself receives a finished allocation.
    A recipe that needs more nodes than srt plans raises :class:`RecipeError`."""
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
    return needs


def resolve(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    allocation: Allocation,
    settings: PlanSettings | None = None,
    needs: NodeNeeds | None = None,
) -> Plan:
    """Build the plan of ``loaded`` on ``allocation``; plan-level problems (ports, nodes)
    raise :class:`RecipeError`. ``needs`` is :func:`node_needs`'s answer when the caller
    has it already."""
    with gc_paused():
        return _resolve(
            loaded,
            plugins,
            allocation,
            settings or PlanSettings(),
            needs or node_needs(loaded, plugins),
        )


def _resolve(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    allocation: Allocation,
    settings: PlanSettings,
    needs: NodeNeeds,
) -> Plan:
    lay = _carve(loaded, allocation, needs)
    paths = JobPaths(
        job_dir=settings.job_dir, job_id=allocation.job_id, local_root=settings.local_root
    )
    recipe_dir = settings.recipe_dir or os.path.dirname(os.path.abspath(loaded.source))
    # the kinds move their unwritten default ports off the machine's shared network; a
    # namespaced job's nodes are networks of their own, where the defaults are free
    shared = allocation.kind == "local" and not _bridged(settings, allocation)
    services, skipped = _runnable(loaded, settings, shared)
    common = job_values(loaded, lay, paths, recipe_dir)
    common.update(kind_placeholders(services))
    ctx = PlanContext(
        loaded,
        plugins,
        lay,
        paths,
        common,
        PortLedger(),
        node_ids={n.name: i for i, n in enumerate(lay.compute)},
        default_restart=restart_record(RestartSpec()),
        services=services,
        binaries=settings.binaries,
        containers=settings.launcher is None or "container" in settings.launcher.applies,
        readiness_floor=settings.readiness_floor,
        mounts=[render(m, common) for m in loaded.recipe.mounts],
    )
    ctx.warnings.extend(skipped)
    if needs.packed:
        idle = layout_mod.idle_gpus(lay.worker_nodes, lay.workers, lay.gpus_per_node)
        if idle:
            ctx.warnings.append(
                "resources.layout packed leaves GPUs idle (the roles' nodes are kept as"
                f" written): {'; '.join(idle)}"
            )
    discovery = _discovery_env(ctx)
    units, phases = _units(ctx, discovery)
    ctx.problems.extend(ctx.ledger.problems())
    ctx.problems.extend(apply_uses(ctx, units))
    network = _local_network(ctx, settings, allocation, units)
    if network is not None and network.mode == "namespaces":
        return _namespaced(loaded, plugins, allocation, settings, needs, network.why)
    if settings.launcher is not None and not settings.launcher.spans_nodes:
        ctx.problems.extend(unstartable_spans(settings.launcher, units))
    if ctx.problems:
        raise _recipe_error(loaded, ctx.problems)
    if settings.launcher is not None:
        ctx.warnings.extend(unapplied_settings(settings.launcher, units))
    if settings.slurm_launcher is not None:
        launch_paths.assign(units, settings.slurm_launcher)
    return Plan(
        version=PLAN_VERSION,
        job_name=loaded.recipe.name,
        job_id=allocation.job_id,
        job_dir=settings.job_dir,
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
        slurm_launcher=settings.slurm_launcher,
        env_passthrough=list(loaded.recipe.env_passthrough),
        local_network=network,
    )


def _bridged(settings: PlanSettings, allocation: Allocation) -> bool:
    """The second planning of a namespaced job: its nodes are on the bridge's subnet."""
    subnet = settings.local_subnet
    if settings.local_network != "namespaces" or subnet is None or allocation.kind != "local":
        return False
    return ipaddress.ip_address(allocation.nodes[0].ip) in ipaddress.ip_network(subnet)


def _local_network(
    ctx: PlanContext, settings: PlanSettings, allocation: Allocation, units: list[PlannedUnit]
) -> LocalNetwork | None:
    """The network mode of a local plan (``None``: not a local plan, or the second planning
    of a namespaced one, whose record the first fills in). In shared mode, wildcard binds
    that collide between virtual nodes are refused (a dry run only warns: the same recipe
    may be meant for a cluster). A dry run shows the nodes as ``srt run`` gives them
    without namespaces: whether the kernel allows them is not asked there."""
    if allocation.kind != "local" or _bridged(settings, allocation):
        return None
    collisions = wildcard_collisions(ctx, units)
    if settings.runs_here:
        names = [s.name for s, _ in collisions]
        mode, why = netmode.choose(settings.local_network, settings.netns_unavailable, names)
        if mode == "namespaces" and settings.local_subnet is None:
            mode, why = "shared", f"{why}; but no private subnet is free"
    else:
        mode, why = "shared", "dry run"
    if mode == "shared":
        hint = netmode.refusal_hint(settings.local_network, settings.netns_unavailable)
        for s, message in collisions:
            if settings.runs_here:
                ctx.problems.append(Problem(s.eff.label_path, message + hint))
            else:
                ctx.warnings.append(f"services[{s.name}]: {message}")
    return LocalNetwork(mode, why)


def _namespaced(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    allocation: Allocation,
    settings: PlanSettings,
    needs: NodeNeeds,
    why: str,
) -> Plan:
    """The plan with every virtual node at its bridge address: planned again on those, so
    every placeholder, probe and environment variable carries them (the plan is final
    when it returns, nothing is rewritten)."""
    assert settings.local_subnet is not None
    bridged, record = netmode.namespaced(allocation, settings.local_subnet, settings.job_dir, why)
    plan = _resolve(
        loaded, plugins, bridged, dataclasses.replace(settings, local_network="namespaces"), needs
    )
    record.forwards = netmode.forwards(plan.units, bridged.nodes)
    plan.local_network = record
    return plan


def wildcard_collisions(ctx: PlanContext, units: list[PlannedUnit]) -> list[tuple[Settled, str]]:
    """Services that bind a port on every interface, on a local run with several virtual
    nodes: the virtual nodes share the machine's network, so the same port claimed on
    another virtual node (by this service or another) cannot be bound there. On separate
    machines (Slurm) the same recipe is fine, which is why only a local plan checks."""
    by_port: dict[int, list[tuple[str, str]]] = {}
    for entry in ctx.ledger.entries():
        by_port.setdefault(int(entry["port"]), []).append((str(entry["node"]), str(entry["owner"])))
    out: list[tuple[Settled, str]] = []
    planned = {u.name: u for u in units}
    for s in ctx.services:
        if s.options is None or s.spec.external is not None:
            continue
        ports = s.kind.wildcard_ports(s.spec, s.options)
        unit = planned.get(s.name)
        if not ports or unit is None:
            continue
        mine = {i.node for i in unit.instances}
        for port in ports:
            others = sorted(
                {f"{owner} on {node}" for node, owner in by_port.get(port, []) if node not in mine}
                | {f"services[{s.name}] on {n}" for n in sorted(mine)[1:]}
            )
            if not others:
                continue
            where = ", ".join(sorted(mine))
            out.append(
                (
                    s,
                    f"binds 0.0.0.0:{port} on {where}; local virtual nodes share one network,"
                    f" so port {port} is then taken for {', '.join(others)} too. Place these"
                    " instances on one virtual node, give them different ports, or run the"
                    " recipe on a cluster (Slurm), where nodes are separate machines",
                )
            )
    return out


def _runnable(
    loaded: LoadedRecipe, settings: PlanSettings, local: bool
) -> tuple[list[Settled], list[str]]:
    """The services the plan runs, and a warning for each that cannot run here.

    Only a plan that runs on this machine now asks the kinds (a dry run or an sbatch
    script is made elsewhere than where it runs); a critical service that cannot run is
    refused, since the job could not succeed without it."""
    if not settings.runs_here:
        return list(loaded.services), []
    kept: list[Settled] = []
    skipped: list[str] = []
    refused: list[Problem] = []
    for s in loaded.services:
        reason = None
        if s.options is not None and s.spec.external is None:
            reason = s.kind.skip_reason(s.spec, s.options)
        if reason is None:
            if local and s.options is not None and s.spec.external is None:
                # only on this machine's virtual nodes: a cluster's nodes are the job's own
                moved = s.kind.local_options(s.spec, s.options)
                if moved is not s.options:
                    s = dataclasses.replace(s, options=moved)
            kept.append(s)
        elif s.critical:
            refused.append(Problem(s.eff.label_path, f"cannot run on this machine: {reason}"))
        else:
            skipped.append(f"services[{s.name}] skipped: {reason}")
    if refused:
        raise _recipe_error(loaded, refused)
    return kept, skipped


def unapplied_settings(launcher: type[Launcher], units: Iterable[PlannedUnit]) -> list[str]:
    """One warning per unit that sets a launch setting ``launcher`` does not apply: a
    recipe written for a cluster may set an image or a CPU binding, and the run says so
    before it starts instead of starting the process without them and saying nothing."""
    out = []
    for unit in units:
        found = [
            key
            for key in LAUNCH_SETTINGS
            if key not in launcher.applies and any(getattr(i, key) for i in unit.instances)
        ]
        if found:
            out.append(
                f"{unit.label}: the {launcher.name} launcher does not apply {', '.join(found)};"
                " it runs the process without them"
            )
    return out


def unstartable_spans(launcher: type[Launcher], units: Iterable[PlannedUnit]) -> list[Problem]:
    """One problem per role whose workers are one launch across several nodes (an MPI
    worker wider than a node), which ``launcher`` cannot start: the local launcher's
    virtual nodes are one machine, with no MPI launch across them."""
    out = []
    for unit in units:
        wide = next((i for i in unit.instances if i.nodes), None)
        if wide is None:
            continue
        where = ("roles", unit.name, "gpus_per_worker") if unit.category == "workers" else ()
        out.append(
            Problem(
                where,
                f"each {unit.name} worker is one launch across {len(wide.nodes)} nodes (an MPI"
                f" job), which the {launcher.name} launcher cannot start: its nodes are"
                " virtual nodes of this machine, with no MPI across them; run it in a Slurm"
                " allocation (srt apply), or use at most gpus_per_node GPUs per worker",
            )
        )
    return out


def _recipe_error(loaded: LoadedRecipe, problems: Iterable[Problem]) -> RecipeError:
    doc = loaded.document
    return RecipeError(doc.source, locate(problems, doc.source, doc.data, doc.mark_of))


def _carve(loaded: LoadedRecipe, allocation: Allocation, needs: NodeNeeds) -> Layout:
    """The allocation carved into head, infra, workers and pools."""
    recipe = loaded.recipe
    ports: dict[str, int | None] = {name: spec.port for name, spec in recipe.roles.items()}
    try:
        return layout_mod.carve(
            list(allocation.nodes), needs, recipe.resources.gpus_per_node, ports
        )
    except layout_mod.AllocationTooSmall as exc:
        raise _recipe_error(loaded, [Problem((), str(exc))]) from None


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

    for settled in ctx.services:
        unit = service_unit(ctx, settled, discovery)
        if unit is not None:
            add(unit)
    # what an engine tells every process of the job, whoever wrote its command
    engine = ctx.loaded.engine
    told = engine.engine.job_env(recipe, engine.options) if engine is not None else {}
    job_env = {**discovery, **told}
    for role, spec in recipe.roles.items():
        add(worker_unit(ctx, role, spec, job_env))
    if recipe.frontend is not None and recipe.frontend.type != "none":
        for unit in frontend_units(ctx, job_env):
            add(unit)
    if recipe.benchmark.type != "manual":
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
    for s in ctx.services:
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
