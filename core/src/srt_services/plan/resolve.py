"""``resolve``: a checked recipe plus an allocation to a :class:`Plan`.

Pure: no processes, no network, no clock. The same inputs give the same plan, which is why
``srt dry-run --json`` output can be compared byte for byte in tests.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from srt_services.extend.context import InstanceContext, JobPaths, Layout, Node, Worker
from srt_services.extend.expansion import InstanceSeed
from srt_services.extend.kind import ServiceKind
from srt_services.extend.servers import url_host
from srt_services.names import env_key
from srt_services.plan import layout as layout_mod
from srt_services.plan.allocation import Allocation, AllocationRequest
from srt_services.plan.model import (
    PHASE_ORDER,
    PLAN_VERSION,
    TIER_OF_PHASE,
    Plan,
    PlannedBuild,
    PlannedInstance,
    PlannedNode,
    PlannedProbe,
    PlannedRestart,
    PlannedUnit,
    ScrapeTarget,
)
from srt_services.plan.ports import PortLedger
from srt_services.recipe.checks import CachedPlugins
from srt_services.recipe.models import (
    MAX_NODES,
    ROLE_NAMES,
    MetricsSpec,
    ProbeBlock,
    ProcessSpec,
    RestartSpec,
)
from srt_services.recipe.placeholders import render
from srt_services.recipe.problems import Path, Problem, RecipeError, locate
from srt_services.recipe.source import gc_paused

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.checks import Settled
    from srt_services.recipe.load import LoadedRecipe

MASTER_PORT = "8700"
METADATA_PORT = "8701"
DEFAULT_TIMEOUT = 120.0
DEFAULT_INTERVAL = 2.0
GRACE = {"workers": 30.0, "frontend": 20.0, "benchmark": 10.0}


@dataclass(slots=True)
class _Ctx:
    loaded: LoadedRecipe
    plugins: CachedPlugins
    layout: Layout
    paths: JobPaths
    common: dict[str, str]
    ledger: PortLedger
    problems: list[Problem]
    warnings: list[str]
    #: node name -> position in ``layout.compute`` (``{node_id}``), computed once
    node_ids: dict[str, int] = field(default_factory=dict)
    #: id(RestartSpec or None) -> its plan record (see :func:`_planned_restart`)
    restarts: dict[int, PlannedRestart | None] = field(default_factory=dict)
    #: the site's least readiness budget for probes whose recipe gives none (0: none)
    readiness_floor: float = 0.0


def resolve(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    request: AllocationRequest | Allocation | Callable[[int], Allocation],
    job_dir: str = "<job_dir>",
    recipe_dir: str | None = None,
    readiness_timeout: float | None = None,
) -> Plan:
    """Build the plan; plan-level problems (ports, nodes) raise :class:`RecipeError`.

    ``recipe_dir`` is what ``{recipe_dir}`` renders to (default: the recipe file's
    directory; ``srt apply`` keeps the original one for the staged copy).
    ``readiness_timeout`` is the site's ``readiness.timeout_seconds``: a default readiness
    budget below it is raised to it (a value the recipe writes is kept as written)."""
    with gc_paused():
        return _resolve(loaded, plugins, request, job_dir, recipe_dir, readiness_timeout or 0.0)


def _resolve(
    loaded: LoadedRecipe,
    plugins: PluginSet,
    request: AllocationRequest | Allocation | Callable[[int], Allocation],
    job_dir: str,
    recipe_dir: str | None,
    readiness_floor: float,
) -> Plan:
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
        doc = loaded.document
        problem = Problem(
            (),
            f"the recipe needs {needs.total} nodes ({needs.describe()});"
            f" srt plans at most {MAX_NODES}",
        )
        raise RecipeError(doc.source, locate([problem], doc.source, doc.data, doc.mark_of))
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
        doc = loaded.document
        raise RecipeError(
            doc.source, locate([Problem((), str(exc))], doc.source, doc.data, doc.mark_of)
        ) from None
    paths = JobPaths(job_dir=job_dir, job_id=allocation.job_id)
    common = {
        "head_node": lay.head.name,
        "head_ip": lay.head.ip,
        "infra_node": lay.infra.name,
        "infra_ip": lay.infra.ip,
        "master_port": MASTER_PORT,
        "metadata_port": METADATA_PORT,
        "gpus_per_node": str(recipe.resources.gpus_per_node),
        "job_dir": paths.job_dir,
        "log_dir": paths.log_dir,
        "job_id": paths.job_id,
        "job_name": recipe.name,
        "frontend_port": str(recipe.frontend.port) if recipe.frontend else "",
        "recipe_dir": recipe_dir or os.path.dirname(os.path.abspath(loaded.source)),
        **_role_values(lay),
    }
    ctx = _Ctx(
        loaded,
        CachedPlugins(plugins),
        lay,
        paths,
        common,
        PortLedger(),
        [],
        [],
        node_ids={n.name: i for i, n in enumerate(lay.compute)},
        readiness_floor=readiness_floor,
    )
    discovery = _discovery_env(ctx)
    units: list[PlannedUnit] = []
    phases: dict[str, list[str]] = {p: [] for p in PHASE_ORDER}
    for settled in loaded.services:
        unit = _service_unit(ctx, settled, discovery)
        if unit is None:
            continue
        units.append(unit)
        phases[unit.phase].append(unit.name)
    for role, spec in recipe.roles.items():
        unit = _worker_unit(ctx, role, spec, discovery)
        units.append(unit)
        phases["workers"].append(unit.name)
    if recipe.frontend is not None and recipe.frontend.type != "none":
        unit = _frontend_unit(ctx, discovery)
        units.append(unit)
        phases["frontend"].append(unit.name)
    if recipe.benchmark.type == "command":
        unit = _benchmark_unit(ctx, units, discovery)
        units.append(unit)
        phases["benchmark"].append(unit.name)
    ctx.problems.extend(ctx.ledger.problems())
    if ctx.problems:
        doc = loaded.document
        raise RecipeError(doc.source, locate(ctx.problems, doc.source, doc.data, doc.mark_of))
    return Plan(
        version=PLAN_VERSION,
        job_name=recipe.name,
        job_id=allocation.job_id,
        job_dir=job_dir,
        allocation=allocation.kind,
        nodes=_planned_nodes(lay),
        head=lay.head.name,
        infra=lay.infra.name,
        client=lay.client.name,
        units=units,
        phases=dict(phases),
        discovery_env=discovery,
        ports=ctx.ledger.entries(),
        scrape_targets=_scrape_targets(units),
        warnings=ctx.warnings,
    )


# --------------------------------------------------------------------------- helpers


def _role_values(lay: Layout) -> dict[str, str]:
    """``{<role>_nodes}``, ``{<role>_ips}`` and ``{<role>_endpoints}`` (ip:port of each
    worker, for roles with a ``port``) for every role, empty for roles the recipe lacks."""
    out: dict[str, str] = {}
    for role in ROLE_NAMES:
        nodes = lay.role_nodes.get(role, ())
        out[f"{role}_nodes"] = ",".join(n.name for n in nodes)
        out[f"{role}_ips"] = ",".join(n.ip for n in nodes)
        out[f"{role}_endpoints"] = ",".join(
            f"{w.nodes[0].ip}:{w.port}"
            for w in lay.workers
            if w.role == role and w.port is not None
        )
    return out


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


def _discovery_env(ctx: _Ctx) -> dict[str, str]:
    env: dict[str, str] = {}
    for s in ctx.loaded.services:
        if s.options is None or type(s.kind).discovery_env is ServiceKind.discovery_env:
            continue  # most kinds have nothing to announce: skip finding their nodes
        address: str | None = None
        if s.spec.external is None:
            nodes = _service_nodes(ctx, s)
            if not nodes:
                continue
            address = nodes[0].ip
        env.update(s.kind.discovery_env(s.spec, s.options, address))
    return env


def _service_nodes(ctx: _Ctx, s: Settled) -> tuple[Node, ...]:
    if s.placement == "pool":
        return tuple(ctx.layout.pools.get(s.pool or "", ()))
    placement = ctx.plugins.placement(s.placement)
    return placement.nodes(ctx.layout, s.pool)


class _Own:
    """The ``{pool_*}`` values of a service's node set, joined on first use and once per
    service, not per instance (a pool of N nodes would otherwise cost N joins of N names;
    most services never name them at all)."""

    __slots__ = ("_data", "nodes")

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes
        self._data: dict[str, str] | None = None

    def get(self) -> dict[str, str]:
        if self._data is None:
            own = self.nodes
            self._data = (
                {
                    "pool_node": own[0].name,
                    "pool_ip": own[0].ip,
                    "pool_nodes": ",".join([n.name for n in own]),
                    "pool_ips": ",".join([n.ip for n in own]),
                    "pool_node_count": str(len(own)),
                }
                if own
                else {}
            )
        return self._data


_NO_OWN = _Own(())


def _values(
    ctx: _Ctx,
    node: Node,
    index: int,
    role: str,
    own: _Own,
    step: str,
    worker: Worker | None,
    rank: int,
) -> dict[str, str]:
    """Placeholder values of one instance: the job's, the instance's, then the pool's."""
    name = node.name
    ip = node.ip
    values = {
        **ctx.common,
        "node": name,
        "node_ip": ip,
        "node_id": str(ctx.node_ids.get(name, index)),
        "index": str(index),
        "role": role,
        "pool_node": name,
        "pool_ip": ip,
        "pool_nodes": name,
        "pool_ips": ip,
        "pool_node_count": "1",
        "work_dir": ctx.paths.work_dir(step),
        **own.get(),
    }
    if worker is not None:
        values.update(
            worker_role=worker.role,
            worker_index=str(worker.index),
            worker_node_rank=str(rank),
            worker_gpus=",".join([str(g) for g in worker.gpus]),
            worker_gpu_count=str(len(worker.gpus)),
            worker_port=str(worker.port) if worker.port is not None else "",
        )
    return values


class _LazyValues(Mapping[str, str]):
    """An instance's placeholder values, built on first use: most instances of a large plan
    have nothing to render, and building ~25 entries each is most of their planning cost."""

    __slots__ = ("_args", "_data")

    def __init__(self, *args: Any) -> None:
        self._args = args
        self._data: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._data is None:
            self._data = _values(*self._args)
        return self._data

    def __getitem__(self, key: str) -> str:
        data = self._data
        if data is None:
            data = self._data = _values(*self._args)
        return data[key]

    def __iter__(self) -> Any:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _render_all(items: list[str] | None, values: Mapping[str, str]) -> list[str]:
    # the ``"{" in v`` test saves a call for the many arguments without a placeholder
    return [render(v, values) if "{" in v else v for v in items or ()]


def _render_env(env: Mapping[str, str], values: Mapping[str, str]) -> dict[str, str]:
    return {k: render(v, values) if "{" in v else v for k, v in env.items()}


def _planned_restart(ctx: _Ctx, r: RestartSpec | None) -> PlannedRestart | None:
    """The plan's restart record of a spec, made once per distinct spec: most services use
    the default, and one shared record (never mutated) costs nothing per service."""
    key = id(r)
    found = ctx.restarts.get(key)
    if found is None:
        spec = r or RestartSpec()
        found = (
            PlannedRestart(
                policy=spec.policy,
                backoff_initial=spec.backoff_initial_seconds,
                backoff_max=spec.backoff_max_seconds,
                max_failures=spec.max_failures,
                window=spec.failure_window_seconds,
                reset_after=spec.reset_after,
                jitter=spec.jitter,
            )
            if spec.policy != "no"
            else None
        )
        ctx.restarts[key] = found
    return found


def _probe(
    ctx: _Ctx,
    block: ProbeBlock | None,
    default: Any,
    ictx: InstanceContext,
    default_port: int | None,
    default_timeout: float,
    default_interval: float,
    liveness: bool = False,
) -> PlannedProbe | None:
    if block is not None and (binding := ctx.loaded.probes.get(id(block))) is not None:
        probe, config = binding
        timeout = block.timeout_seconds or _least(ctx, DEFAULT_TIMEOUT, liveness)
        interval = block.interval_seconds or DEFAULT_INTERVAL
    elif default is not None:
        probe = ctx.plugins.probe(default.name)
        config = probe.Config.model_validate(default.config)
        timeout = _least(ctx, default.timeout or default_timeout, liveness)
        interval = default.interval or default_interval
    else:
        return None
    planned = probe.plan(config, ictx, default_port)
    path = planned.get("path")
    if isinstance(path, str) and "{" in path:
        planned["path"] = render(path, ictx.values)
    result = PlannedProbe(
        probe=probe.name,
        config=planned,
        timeout=timeout,
        interval=interval,
        describe=probe.describe(planned),
    )
    if liveness and block is not None:
        result.period = getattr(block, "period_seconds", None)
        result.failure_threshold = getattr(block, "failure_threshold", None)
        result.attempt_timeout = getattr(block, "attempt_timeout_seconds", None)
    port = probe.port(config) if probe.uses_port else None
    if probe.uses_port and port is None:
        port = default_port
    if port is not None:
        result.config.setdefault("port", port)
    return result


def _least(ctx: _Ctx, default: float, liveness: bool) -> float:
    """A default readiness budget, raised to the site's least one (liveness has none)."""
    return default if liveness else max(default, ctx.readiness_floor)


def _preamble(*parts: str | None) -> str | None:
    kept = [p.strip("\n") for p in parts if p and p.strip()]
    return "\n".join(kept) if kept else None


# --------------------------------------------------------------------------- services


_HOOKS = ("command", "default_env", "forced_env", "preamble", "readiness", "files")
_OVERRIDES: dict[type, frozenset[str]] = {}


def _overridden(kind: ServiceKind) -> frozenset[str]:
    """Which per-instance kind methods a kind class overrides (the rest need no call)."""
    cls = type(kind)
    found = _OVERRIDES.get(cls)
    if found is None:
        found = frozenset(h for h in _HOOKS if getattr(cls, h) is not getattr(ServiceKind, h))
        _OVERRIDES[cls] = found
    return found


def _metric_record(m: MetricsSpec) -> dict[str, Any]:
    """``m.model_dump()``, written out: a tenth of the cost, same keys in the same order."""
    return {"port": m.port, "path": m.path, "nodes": m.nodes, "name": m.name}


def _service_unit(ctx: _Ctx, s: Settled, discovery: dict[str, str]) -> PlannedUnit | None:
    spec = s.spec
    kind = s.kind
    phase = s.start
    name = s.name
    placement = s.placement
    base = PlannedUnit(
        name=name,
        category="service",
        type=spec.type,
        phase=phase,
        tier=TIER_OF_PHASE[phase],
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
        inherit_discovery_env=spec.inherit_discovery_env and not kind.is_discovery_plane,
    )
    if spec.external is not None:
        return base
    nodes = _service_nodes(ctx, s)
    worker_roles = ctx.plugins.placement(placement).worker_roles if placement != "pool" else None
    seeds: list[InstanceSeed] = (
        ctx.plugins.expansion(s.per).seeds(name, nodes, ctx.layout, worker_roles) if nodes else []
    )
    if not seeds:
        what = "workers" if s.per == "worker" else "nodes"
        message = f"placement {placement} selects no {what} in this job"
        if s.eff.path is None:
            ctx.warnings.append(
                f"services[{name}] (implied by {s.eff.implied_by}): {message}; skipped"
            )
            return None
        ctx.problems.append(Problem((*s.eff.label_path, "placement"), message))
        return None
    base.nodes = (
        [seeds[0].node.name]
        if len(seeds) == 1
        else list(dict.fromkeys([seed.node.name for seed in seeds]))
    )
    if not s.critical and not spec.terminal:
        base.restart = _planned_restart(ctx, spec.restart)
    options = s.options
    metrics = spec.metrics or kind.metrics(spec, options)
    if metrics:
        base.metrics = [_metric_record(m) for m in metrics]
    cwd = None
    if spec.source is not None:
        src_dir = f"{ctx.paths.job_dir}/src/{name}"
        cwd = f"{src_dir}/{spec.source.path}" if spec.source.path else src_dir
    kind_ports = tuple(kind.listen_ports(spec, options))
    hooks = _overridden(kind)
    own = _Own(nodes) if len(nodes) > 1 else _NO_OWN
    at = s.eff.label_path
    owner = f"services[{name}]"
    # What does not change from one instance to the next is rendered once: the common case
    # (no placeholder in the recipe's strings, a kind that adds none) then costs a copy.
    # ``"{" in "".join(...)`` is one C-level scan instead of a generator per word.
    static_argv: list[str] | None = None
    if "command" not in hooks or spec.command is not None:
        words = [*(spec.command or ()), *spec.args]
        if "{" not in "".join(words):
            static_argv = words
    env_base: dict[str, str] = discovery if base.inherit_discovery_env else {}
    recipe_env_static = "{" not in "".join(spec.env.values())
    static_env: dict[str, str] | None = None
    if recipe_env_static and not hooks & {"default_env", "forced_env"}:
        static_env = {**env_base, **spec.env}
    preamble_hook = "preamble" in hooks
    static_preamble = not preamble_hook and (spec.preamble is None or "{" not in spec.preamble)
    readiness_block = spec.readiness
    liveness_block = spec.liveness
    needs_ctx = bool(hooks) or readiness_block is not None or liveness_block is not None
    warned: set[str] = set()
    instances = base.instances
    paths = ctx.paths
    stop_signal = kind.stop_signal
    container = spec.container
    srun_options = spec.srun_options
    # Values are built lazily when only a hook or a probe might read them, and at once when
    # a recipe string will (a plain dict keeps ``format_map`` lookups in C).
    eager = (
        static_argv is None
        or static_env is None
        or not static_preamble
        or bool(container)
        or bool(srun_options)
    )
    ledger_claim = ctx.ledger.claim
    for index, seed in enumerate(seeds):
        worker = seed.worker
        step = seed.step
        node = seed.node
        values: Mapping[str, str] = (
            _values(ctx, node, index, placement, own, step, worker, seed.worker_node_rank)
            if eager
            else _LazyValues(ctx, node, index, placement, own, step, worker, seed.worker_node_rank)
        )
        ictx = (
            InstanceContext(
                service=name,
                step=step,
                node=node,
                index=index,
                role=placement,
                nodes=nodes,
                layout=ctx.layout,
                paths=paths,
                worker=worker,
                worker_node_rank=seed.worker_node_rank,
                values=values,
            )
            if needs_ctx
            else None
        )
        if static_argv is not None:
            argv = list(static_argv)
        else:
            assert spec.command is not None or ictx is not None
            command = (
                spec.command if spec.command is not None else kind.command(spec, options, ictx)  # type: ignore[arg-type]
            )
            argv = _render_all(command, values) + _render_all(spec.args, values)
        if static_env is not None:
            env = static_env
        else:
            env = dict(env_base)
            if "default_env" in hooks:
                env.update(_render_env(kind.default_env(spec, options, ictx), values))  # type: ignore[arg-type]
            env.update(spec.env if recipe_env_static else _render_env(spec.env, values))
            if "forced_env" in hooks:
                forced = _render_env(kind.forced_env(spec, options, ictx), values)  # type: ignore[arg-type]
                for key in forced:
                    if key in spec.env and key not in warned:
                        warned.add(key)
                        base.warnings.append(
                            f"env.{key} is set by type {kind.name}; the recipe's value is ignored"
                        )
                env.update(forced)
        if worker is not None and not worker.whole_node:
            env = {**env, "CUDA_VISIBLE_DEVICES": ",".join([str(g) for g in worker.gpus])}
        if static_preamble:
            preamble = _preamble(spec.preamble) if spec.preamble else None
        else:
            kpre = kind.preamble(spec, options, ictx) if preamble_hook else None  # type: ignore[arg-type]
            preamble = _preamble(
                render(kpre, values) if kpre else None,
                render(spec.preamble, values) if spec.preamble else None,
            )
        readiness = None
        liveness = None
        if ictx is not None:
            default = kind.readiness(spec, options, ictx) if "readiness" in hooks else None
            if readiness_block is not None or default is not None:
                readiness = _probe(
                    ctx,
                    readiness_block,
                    default,
                    ictx,
                    None,
                    kind.default_readiness_timeout,
                    kind.default_readiness_interval,
                )
            if liveness_block is not None:
                liveness = _probe(
                    ctx, liveness_block, None, ictx, None, DEFAULT_TIMEOUT, DEFAULT_INTERVAL, True
                )
        # port -> where the recipe says it (the first claim of a port wins the path)
        claims: dict[int, Path] = dict.fromkeys(kind_ports, at) if kind_ports else {}
        if readiness is not None:
            rport = readiness.config.get("port")
            if isinstance(rport, int) and rport not in claims:
                claims[rport] = (*at, "readiness")
        for i, m in enumerate(metrics):
            if (m.nodes == "all" or index == 0) and m.port not in claims:
                claims[m.port] = (*at, "metrics", i) if spec.metrics else at
        node_name = node.name
        for port, where in claims.items():
            ledger_claim(node_name, port, owner, step, where)
        instances.append(
            PlannedInstance(
                step=step,
                unit=name,
                node=node_name,
                node_ip=node.ip,
                index=index,
                argv=argv,
                env=env,
                log=f"logs/{step}.out",
                work_dir=paths.work_dir(step),
                preamble=preamble,
                cwd=cwd,
                readiness=readiness,
                liveness=liveness,
                ports=list(claims),
                files=(
                    {k: render(v, values) for k, v in kind.files(spec, options, ictx).items()}  # type: ignore[arg-type]
                    if "files" in hooks
                    else {}
                ),
                worker=worker.key if worker else None,
                gpus=list(worker.gpus) if worker else None,
                container=render(container, values) if container else None,
                cpus_per_task=spec.cpus_per_task,
                cpu_bind=spec.cpu_bind,
                srun_options=(
                    {k: render(v, values) for k, v in srun_options.items()} if srun_options else {}
                ),
                stop_signal=stop_signal,
            )
        )
    base.container = instances[0].container
    if spec.source is not None:
        first = seeds[0]
        first_values = _values(
            ctx, first.node, 0, placement, own, first.step, first.worker, first.worker_node_rank
        )
        base.build = PlannedBuild(
            git=spec.source.git,
            checkout=spec.source.checkout,
            rev=spec.source.rev,
            src_dir=src_dir,
            path=spec.source.path,
            build_command=_render_all(spec.build_command, first_values) or None,
            timeout=spec.build_timeout_seconds,
            nodes=list(base.nodes),
            env=dict(instances[0].env),
        )
    return base


# --------------------------------------------------------------------------- job processes


def _process_instance(
    ctx: _Ctx,
    spec: ProcessSpec,
    unit: str,
    step: str,
    node: Node,
    index: int,
    role: str,
    env_base: dict[str, str],
    worker: Worker | None = None,
    rank: int = 0,
    readiness: ProbeBlock | None = None,
    default_port: int | None = None,
) -> PlannedInstance:
    values = _values(ctx, node, index, role, _NO_OWN, step, worker, rank)
    ictx = InstanceContext(
        service=unit,
        step=step,
        node=node,
        index=index,
        role=role,
        nodes=(node,),
        layout=ctx.layout,
        paths=ctx.paths,
        worker=worker,
        worker_node_rank=rank,
        values=values,
    )
    env = dict(env_base)
    env.update(_render_env(spec.env, values))
    if worker is not None and not worker.whole_node:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in worker.gpus)
    probe = _probe(ctx, readiness, None, ictx, default_port, DEFAULT_TIMEOUT, DEFAULT_INTERVAL)
    return PlannedInstance(
        step=step,
        unit=unit,
        node=node.name,
        node_ip=node.ip,
        index=index,
        argv=_render_all(spec.command, values) + _render_all(spec.args, values),
        env=env,
        log=f"logs/{step}.out",
        work_dir=values["work_dir"],
        preamble=render(spec.preamble, values) if spec.preamble else None,
        readiness=probe,
        worker=worker.key if worker else None,
        gpus=list(worker.gpus) if worker else None,
        container=render(spec.container, values) if spec.container else None,
    )


def _worker_unit(ctx: _Ctx, role: str, spec: Any, discovery: dict[str, str]) -> PlannedUnit:
    instances: list[PlannedInstance] = []
    for worker in ctx.layout.workers:
        if worker.role != role:
            continue
        for rank, node in enumerate(worker.nodes):
            step = (
                f"{role}_{worker.index}"
                if len(worker.nodes) == 1
                else f"{role}_{worker.index}_{node.name}"
            )
            inst = _process_instance(
                ctx,
                spec,
                role,
                step,
                node,
                len(instances),
                role,
                dict(discovery),
                worker,
                rank,
                spec.readiness if rank == 0 else None,
                worker.port,
            )
            if worker.port is not None and rank == 0:
                ctx.ledger.claim(
                    node.name, worker.port, f"roles.{role}", step, ("roles", role, "port")
                )
                inst.ports.append(worker.port)
            instances.append(inst)
    return PlannedUnit(
        name=role,
        category="workers",
        type=role,
        phase="workers",
        tier=TIER_OF_PHASE["workers"],
        critical=True,
        terminal=False,
        stop_grace=spec.stop_grace_seconds
        if spec.stop_grace_seconds is not None
        else GRACE["workers"],
        instances=instances,
        placement=role,
        nodes=list(dict.fromkeys(i.node for i in instances)),
        container=instances[0].container if instances else None,
    )


def _frontend_unit(ctx: _Ctx, discovery: dict[str, str]) -> PlannedUnit:
    spec = ctx.loaded.recipe.frontend
    assert spec is not None
    head = ctx.layout.head
    inst = _process_instance(
        ctx,
        spec,
        "frontend",
        "frontend",
        head,
        0,
        "head",
        dict(discovery),
        readiness=spec.readiness,
        default_port=spec.port,
    )
    ctx.ledger.claim(head.name, spec.port, "frontend", "frontend", ("frontend", "port"))
    inst.ports.append(spec.port)
    return PlannedUnit(
        name="frontend",
        category="frontend",
        type=spec.type,
        phase="frontend",
        tier=TIER_OF_PHASE["frontend"],
        critical=True,
        terminal=False,
        stop_grace=spec.stop_grace_seconds
        if spec.stop_grace_seconds is not None
        else GRACE["frontend"],
        instances=[inst],
        placement="head",
        nodes=[head.name],
        container=inst.container,
    )


def _benchmark_unit(ctx: _Ctx, units: list[PlannedUnit], discovery: dict[str, str]) -> PlannedUnit:
    recipe = ctx.loaded.recipe
    spec = recipe.benchmark
    client = ctx.layout.client
    env = dict(discovery)
    env["SRT_GPUS_PER_NODE"] = str(recipe.resources.gpus_per_node)
    env["SRT_WORKER_NODES"] = ",".join(n.name for n in ctx.layout.worker_nodes)
    if recipe.frontend is not None and recipe.frontend.type != "none":
        head = ctx.layout.head
        host = url_host(head.ip)
        env["SRT_FRONTEND_URL"] = f"http://{host}:{recipe.frontend.port}"
    for unit in units:
        if unit.category != "service" or not unit.instances:
            continue
        key = env_key(unit.name)
        ips = list(dict.fromkeys(i.node_ip for i in unit.instances))
        env[f"SRT_SERVICE_{key}_NODES"] = ",".join(unit.nodes)
        env[f"SRT_SERVICE_{key}_IPS"] = ",".join(ips)
        env[f"SRT_SERVICE_{key}_NODE_COUNT"] = str(len(unit.nodes))
    inst = _process_instance(ctx, spec, "benchmark", "benchmark", client, 0, "client", env)
    return PlannedUnit(
        name="benchmark",
        category="benchmark",
        type="command",
        phase="benchmark",
        tier=TIER_OF_PHASE["benchmark"],
        critical=False,
        terminal=True,
        stop_grace=spec.stop_grace_seconds
        if spec.stop_grace_seconds is not None
        else GRACE["benchmark"],
        instances=[inst],
        placement="client",
        nodes=[client.name],
        container=inst.container,
        timeout=spec.timeout_seconds,
    )


def _scrape_targets(units: list[PlannedUnit]) -> list[ScrapeTarget]:
    targets: list[ScrapeTarget] = []
    for unit in units:
        if unit.category != "service" or not unit.instances or not unit.metrics:
            continue
        by_node: dict[str, str] = {}
        for inst in unit.instances:
            by_node.setdefault(inst.node, inst.node_ip)
        for m in unit.metrics:
            nodes = list(by_node.items())
            if m["nodes"] == "first":
                nodes = nodes[:1]
            name = m.get("name") or unit.name
            for node, ip in nodes:
                host = url_host(ip)
                targets.append(
                    ScrapeTarget(
                        name=f"{name}_{node}",
                        service=unit.name,
                        url=f"http://{host}:{m['port']}{m['path']}",
                        node=node,
                    )
                )
    return targets


def shell_preview(argv: list[str]) -> str:
    return shlex.join(argv)
