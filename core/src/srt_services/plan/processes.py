"""The units of the job's own processes: each role's workers, the frontend, the benchmark.

Unlike services, these are defined by the recipe alone (no kind, no hooks): their
instances render the recipe's strings with the instance's values and take the readiness
block the checks bound for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from srt_services.checking.settled import bound
from srt_services.contracts.benchmark import RESULT_FILE, RESULT_VAR
from srt_services.contracts.context import InstanceContext
from srt_services.contracts.kind import DefaultProbe, ServiceKind
from srt_services.contracts.plan import TIER_OF_PHASE, PlannedInstance, PlannedUnit
from srt_services.contracts.servers import url_host
from srt_services.names import env_key
from srt_services.plan.balancer import nginx_argv, nginx_conf, nginx_preamble
from srt_services.plan.probes import DEFAULT_INTERVAL, DEFAULT_TIMEOUT, planned_probe
from srt_services.plan.services import service_nodes
from srt_services.plan.targets import endpoint_targets, metric_record
from srt_services.plan.values import (
    NO_OWN_NODES,
    instance_values,
    joined_preamble,
    render_all,
    render_env,
    with_local_dir,
)
from srt_services.recipe.placeholders import render
from srt_services.recipe.problems import Problem
from srt_services.recipe.shell import ShellValueError, render_shell

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from srt_services.checking.rules.engines import SettledEngine
    from srt_services.checking.settled import ProbeBinding
    from srt_services.contracts.context import Node, Worker
    from srt_services.contracts.engine import EngineProcess, WorkerProcess
    from srt_services.plan.context import PlanContext
    from srt_services.recipe.models import MetricsSpec, ProcessSpec, RoleSpec
    from srt_services.recipe.problems import Path

    #: How a plugin (an engine, a benchmark) builds one process, given its context.
    Build: TypeAlias = Callable[[InstanceContext], EngineProcess]

#: Default stop grace of each category, in seconds (a recipe's ``stop_grace_seconds`` wins).
GRACE = {"workers": 30.0, "frontend": 20.0, "benchmark": 10.0}
#: The benchmark's summary, relative to the job directory (``SRT_BENCHMARK_RESULT``).
BENCHMARK_RESULT = RESULT_FILE


@dataclass(slots=True)
class _Placed:
    """Where one process instance runs, and as what."""

    unit: str
    step: str
    node: Node
    index: int
    role: str
    worker: Worker | None = None
    rank: int = 0


@dataclass(slots=True)
class _Scraped:
    """The metrics endpoints one instance serves (a worker's first node, the frontend)."""

    metrics: list[MetricsSpec]
    role: str
    name: str
    first: bool
    port_shift: int = 0


def _process_instance(
    ctx: PlanContext,
    spec: ProcessSpec,
    at: _Placed,
    env_base: dict[str, str],
    readiness: ProbeBinding | None = None,
    default_port: int | None = None,
    extra_env: Mapping[str, str] | None = None,
    scraped: _Scraped | None = None,
    build: Build | None = None,
) -> PlannedInstance:
    """One instance of a job process: the recipe's command, or what ``build`` (an engine
    or a benchmark plugin) makes of it, with the recipe's ``args``, ``env`` and
    ``preamble`` over it."""
    node, worker = at.node, at.worker
    values = instance_values(ctx, node, at.index, at.role, NO_OWN_NODES, at.step, worker, at.rank)
    ictx = InstanceContext(
        service=at.unit,
        step=at.step,
        node=node,
        index=at.index,
        role=at.role,
        nodes=worker.nodes if worker is not None else (node,),
        layout=ctx.layout,
        paths=ctx.paths,
        worker=worker,
        worker_node_rank=at.rank,
        values=values,
        binaries=ctx.binaries,
    )
    built = build(ictx) if build is not None else None
    written = _written_at(at.unit)
    env = dict(env_base)
    if extra_env:
        env.update(render_env(extra_env, values))
    if built is not None:
        env.update(render_env(built.env, values))
    env.update(render_env(spec.env, values))
    if built is not None and built.forced_env:
        env.update(render_env(built.forced_env, values))
    if worker is not None and not worker.whole_node and (built is None or built.visible_devices):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in worker.gpus)
    probe = planned_probe(
        ctx,
        readiness,
        built.readiness if built is not None else None,
        ictx,
        default_port,
        DEFAULT_TIMEOUT,
        DEFAULT_INTERVAL,
        at=(*written, "readiness"),
    )
    command = built.argv if built is not None else spec.command
    argv = render_all(command, values) + render_all(spec.args, values)
    container = spec.container or ctx.loaded.recipe.container  # the job container
    preamble = joined_preamble(
        _shell(ctx, built.preamble, values, (*written, "command")) if built else None,
        _shell(ctx, spec.preamble, values, (*written, "preamble")) if spec.preamble else None,
    )
    files = (
        {render(k, values): render(v, values) for k, v in built.files.items()}
        if built is not None and built.files
        else {}
    )
    preamble = with_local_dir(preamble, ictx.local_dir, argv, env, files)
    inst = PlannedInstance(
        step=at.step,
        unit=at.unit,
        node=node.name,
        node_ip=node.ip,
        index=at.index,
        argv=argv,
        env=env,
        log=f"logs/{at.step}.out",
        work_dir=values["work_dir"],
        preamble=preamble,
        readiness=probe,
        files=files,
        worker=worker.key if worker else None,
        gpus=list(worker.gpus) if worker else None,
        container=render(container, values) if container else None,
        srun_options=dict(built.srun_options) if built is not None else {},
        mounts=ctx.mounts if container else [],
    )
    if built is not None and built.spans_nodes and worker is not None and len(worker.nodes) > 1:
        inst.nodes = [n.name for n in worker.nodes]
        inst.tasks_per_node = built.tasks_per_node
    if built is not None:
        # an instance across nodes: its ports are its leader rank's, on its first node
        owner = ".".join(written)
        for port in built.ports:
            if port not in inst.ports:
                ctx.ledger.claim(node.name, port, owner, at.step, written)
                inst.ports.append(port)
    if scraped is not None and scraped.metrics:
        ctx.targets.extend(
            endpoint_targets(
                scraped.metrics,
                inst,
                values,
                unit=at.unit,
                role=scraped.role,
                default_name=scraped.name,
                first=scraped.first,
                port_shift=scraped.port_shift,
            )
        )
    return inst


def _shell(
    ctx: PlanContext, text: str | None, values: Mapping[str, str], where: Path
) -> str | None:
    """Shell text with each placeholder quoted for where it stands; a value that cannot be
    quoted there is a problem at ``where`` (reported once)."""
    if not text:
        return None
    try:
        return render_shell(text, values)  # bash: each value one word
    except ShellValueError as exc:
        problem = Problem(where, str(exc))
        if problem not in ctx.problems:
            ctx.problems.append(problem)
        return None


def _claim_metrics(
    ctx: PlanContext, inst: PlannedInstance, metrics: list[MetricsSpec], owner: str, shift: int
) -> None:
    """The ports of a worker's or the frontend's metrics endpoints, in the port ledger."""
    for i, m in enumerate(metrics):
        port = m.port + shift
        if port in inst.ports:
            continue  # served on the process's own port (vLLM's /metrics)
        where: Path = (*owner.split("."), "metrics", i)
        ctx.ledger.claim(inst.node, port, owner, inst.step, where)
        inst.ports.append(port)


def _written_at(unit: str) -> tuple[str, ...]:
    """Where the recipe writes a job process's settings (``roles.<role>``, ``frontend``)."""
    return (unit,) if unit in ("frontend", "benchmark") else ("roles", unit)


def _told_workers(ctx: PlanContext, role: str) -> dict[str, str]:
    """What the services tell this role's workers (``ServiceKind.worker_env``), in the
    order the services launch; a later service's value wins."""
    out: dict[str, str] = {}
    recipe = ctx.loaded.recipe
    for s in ctx.services:
        if s.options is None or type(s.kind).worker_env is ServiceKind.worker_env:
            continue  # most kinds tell workers nothing: skip the call
        out.update(s.kind.worker_env(s.spec, s.options, role, recipe))
    return out


def _grace(spec: ProcessSpec, category: str, settled: SettledEngine | None = None) -> float:
    """The recipe's grace, else the engine's for what it builds, else srt's default."""
    if spec.stop_grace_seconds is not None:
        return spec.stop_grace_seconds
    if settled is not None and category == "workers":
        return settled.engine.worker_stop_grace
    if settled is not None and category == "frontend":
        return settled.engine.frontend_stop_grace
    return GRACE[category]


def _engine_worker(ctx: PlanContext, settled: SettledEngine, process: WorkerProcess) -> Build:
    """How the engine builds one worker instance."""
    recipe = ctx.loaded.recipe
    processes = ctx.worker_processes()

    def build(ictx: InstanceContext) -> EngineProcess:
        return settled.engine.worker(recipe, settled.options, process, processes, ictx)

    return build


def worker_unit(
    ctx: PlanContext, role: str, spec: RoleSpec, discovery: dict[str, str]
) -> PlannedUnit:
    """A role's workers: one instance per node of each worker, the first one probed; or,
    for a worker the engine launches once across its nodes (``EngineProcess.spans_nodes``),
    one instance carrying every node."""
    readiness = bound(
        spec.readiness, ctx.loaded.job_probes.roles.get(role), f"roles.{role}", "readiness"
    )
    told = _told_workers(ctx, role)
    settled = ctx.loaded.engine if spec.command is None else None
    processes = {(p.worker.key, p.rank): p for p in ctx.worker_processes()}
    instances: list[PlannedInstance] = []
    for worker in ctx.layout.workers:
        if worker.role != role:
            continue
        for rank, node in enumerate(worker.nodes):
            build = None
            if settled is not None:
                build = _engine_worker(ctx, settled, processes[(worker.key, rank)])
            step = (
                f"{role}_{worker.index}"
                if len(worker.nodes) == 1
                else f"{role}_{worker.index}_{node.name}"
            )
            inst = _process_instance(
                ctx,
                spec,
                _Placed(role, step, node, len(instances), role, worker, rank),
                dict(discovery),
                readiness if rank == 0 else None,
                worker.port,
                told,
                _Scraped(spec.metrics, role, worker.key, worker.index == 0, worker.slot)
                if rank == 0
                else None,
                build,
            )
            if worker.port is not None and rank == 0:
                ctx.ledger.claim(
                    node.name, worker.port, f"roles.{role}", step, ("roles", role, "port")
                )
                inst.ports.append(worker.port)
            if spec.metrics and rank == 0:
                _claim_metrics(ctx, inst, spec.metrics, f"roles.{role}", worker.slot)
            instances.append(inst)
            if inst.nodes:
                break  # one launch across the worker's nodes: no instance per node
    return PlannedUnit(
        name=role,
        category="workers",
        metrics=[metric_record(m) for m in spec.metrics],
        options=dict(spec.config),
        type=role,
        phase="workers",
        tier=TIER_OF_PHASE["workers"],
        critical=True,
        terminal=False,
        stop_grace=_grace(spec, "workers", settled),
        instances=instances,
        placement=role,
        nodes=list(dict.fromkeys(n for i in instances for n in i.all_nodes())),
        container=instances[0].container if instances else None,
    )


def frontend_units(ctx: PlanContext, discovery: dict[str, str]) -> list[PlannedUnit]:
    """The frontend on the head node; with ``replicas``, one on each of that many worker
    nodes other than the head, and the balancer on the head in front of them. None when
    the engine runs no frontend (a worker serves the public port itself)."""
    recipe = ctx.loaded.recipe
    spec = recipe.frontend
    assert spec is not None
    settled = ctx.loaded.engine if spec.command is None else None
    if settled is not None and not settled.engine.runs_frontend_for(recipe):
        return []
    head = ctx.layout.head
    if spec.replicas == 1:
        placed = [(head, spec.port)]
    else:
        others = [n for n in ctx.layout.worker_nodes if n.name != head.name]
        if len(others) < spec.replicas:
            ctx.problems.append(
                Problem(
                    ("frontend", "replicas"),
                    f"{spec.replicas} replicas need as many worker nodes besides the head node;"
                    f" the job has {len(others)}",
                )
            )
        placed = [(n, spec.internal_port) for n in others[: spec.replicas]]
    readiness = bound(spec.readiness, ctx.loaded.job_probes.frontend, "frontend", "readiness")
    instances = []
    for i, (node, port) in enumerate(placed):
        step = "frontend" if spec.replicas == 1 else f"frontend_{i}"
        build = _engine_frontend(ctx, settled, port) if settled is not None else None
        inst = _process_instance(
            ctx,
            spec,
            _Placed("frontend", step, node, i, "head" if node is head else "frontend"),
            dict(discovery),
            readiness=readiness,
            default_port=port,
            scraped=_Scraped(spec.metrics, "frontend", "frontend", i == 0),
            build=build,
        )
        if port not in inst.ports:
            ctx.ledger.claim(node.name, port, "frontend", step, ("frontend", "port"))
            inst.ports.append(port)
        if spec.metrics:
            _claim_metrics(ctx, inst, spec.metrics, "frontend", 0)
        instances.append(inst)
    unit = PlannedUnit(
        name="frontend",
        category="frontend",
        metrics=[metric_record(m) for m in spec.metrics],
        type=spec.type,
        phase="frontend",
        tier=TIER_OF_PHASE["frontend"],
        critical=True,
        terminal=False,
        stop_grace=_grace(spec, "frontend", settled),
        instances=instances,
        placement="head" if spec.replicas == 1 else "workers",
        nodes=list(dict.fromkeys(i.node for i in instances)),
        container=instances[0].container if instances else None,
    )
    if spec.replicas == 1:
        return [unit]
    return [unit, _balancer_unit(ctx, instances)]


def _engine_frontend(ctx: PlanContext, settled: SettledEngine, port: int) -> Build:
    recipe = ctx.loaded.recipe

    def build(ictx: InstanceContext) -> EngineProcess:
        return settled.engine.frontend(recipe, settled.options, ictx, port)

    return build


def _balancer_unit(ctx: PlanContext, replicas: list[PlannedInstance]) -> PlannedUnit:
    """nginx on the head node's public port, in front of the frontend replicas."""
    spec = ctx.loaded.recipe.frontend
    assert spec is not None
    head = ctx.layout.head
    step = "frontend_balancer"
    values = instance_values(ctx, head, 0, "head", NO_OWN_NODES, step, None, 0)
    work = values["work_dir"]
    conf = nginx_conf(
        spec.balancer, head.ip, spec.port, [(i.node_ip, i.ports[0]) for i in replicas]
    )
    ictx = InstanceContext(
        service="frontend-balancer",
        step=step,
        node=head,
        index=0,
        role="head",
        nodes=(head,),
        layout=ctx.layout,
        paths=ctx.paths,
        values=values,
        binaries=ctx.binaries,
    )
    probe = planned_probe(
        ctx, None, DefaultProbe("tcp", {"port": spec.port}), ictx, spec.port,
        DEFAULT_TIMEOUT, DEFAULT_INTERVAL,
    )  # fmt: skip
    image = spec.balancer.image
    inst = PlannedInstance(
        step=step,
        unit="frontend-balancer",
        node=head.name,
        node_ip=head.ip,
        index=0,
        argv=nginx_argv(work),
        env={},
        log=f"logs/{step}.out",
        work_dir=work,
        preamble=nginx_preamble(spec.balancer),
        readiness=probe,
        files={"nginx.conf": conf},
        container=render(image, values) if image else None,
        mounts=ctx.mounts if image else [],
    )
    ctx.ledger.claim(head.name, spec.port, "frontend", step, ("frontend", "port"))
    inst.ports.append(spec.port)
    return PlannedUnit(
        name="frontend-balancer",
        category="frontend",
        type="nginx",
        phase="frontend",
        tier=TIER_OF_PHASE["frontend"],
        critical=True,
        terminal=False,
        stop_grace=GRACE["frontend"],
        instances=[inst],
        placement="head",
        nodes=[head.name],
        container=inst.container,
    )


def _public_node(ctx: PlanContext) -> Node | None:
    """Where the job's public port is served: the frontend's node, or, for an engine that
    runs no frontend process, the node of the worker serving it."""
    recipe = ctx.loaded.recipe
    if recipe.frontend is None or recipe.frontend.type == "none":
        return None
    settled = ctx.loaded.engine
    if (
        settled is not None
        and recipe.frontend.command is None
        and not settled.engine.runs_frontend_for(recipe)
    ):
        worker = settled.engine.public_worker(ctx.layout)
        return worker.nodes[0] if worker is not None else None
    return ctx.layout.head


def _service_facts(ctx: PlanContext) -> dict[str, dict[str, str]]:
    """What each kind tells the benchmark about its service (``ServiceKind.service_facts``),
    by service name; only kinds that override the hook are asked."""
    out: dict[str, dict[str, str]] = {}
    for s in ctx.services:
        if s.options is None or s.spec.external is not None:
            continue
        if type(s.kind).service_facts is ServiceKind.service_facts:
            continue
        nodes = service_nodes(ctx, s)
        if nodes:
            out[s.name] = s.kind.service_facts(s.spec, s.options, nodes)
    return out


def benchmark_unit(
    ctx: PlanContext, units: list[PlannedUnit], discovery: dict[str, str]
) -> PlannedUnit:
    """The benchmark, on the client node, told where the frontend and every service are."""
    recipe = ctx.loaded.recipe
    spec = recipe.benchmark
    client = ctx.layout.client
    env = dict(discovery)
    env["SRT_GPUS_PER_NODE"] = str(recipe.resources.gpus_per_node)
    env["SRT_WORKER_NODES"] = ",".join(n.name for n in ctx.layout.worker_nodes)
    public = _public_node(ctx)
    if public is not None and recipe.frontend is not None:
        env["SRT_FRONTEND_URL"] = f"http://{url_host(public.ip)}:{recipe.frontend.port}"
    # where the benchmark leaves its summary, which srt copies into result.json
    env[RESULT_VAR] = f"{ctx.paths.job_dir}/{BENCHMARK_RESULT}"
    services = [u for u in units if u.category == "service" and u.instances]
    # what kinds add first, so that core's own keys win over any spelling that collides
    facts = _service_facts(ctx)
    for unit in services:
        for fact, value in facts.get(unit.name, {}).items():
            env[f"SRT_SERVICE_{env_key(unit.name)}_{env_key(fact)}"] = value
    for unit in services:
        key = env_key(unit.name)  # distinct for every service (rules/envnames.py)
        ips = list(dict.fromkeys(i.node_ip for i in unit.instances))
        env[f"SRT_SERVICE_{key}_NODES"] = ",".join(unit.nodes)
        env[f"SRT_SERVICE_{key}_IPS"] = ",".join(ips)
        env[f"SRT_SERVICE_{key}_NODE_COUNT"] = str(len(unit.nodes))
    build: Build | None = None
    settled = ctx.loaded.benchmark
    if settled is not None:
        kind, options = settled.kind, settled.options

        def build(ictx: InstanceContext) -> EngineProcess:
            return kind.process(recipe, options, ictx)

    at = _Placed("benchmark", "benchmark", client, 0, "client")
    inst = _process_instance(ctx, spec, at, env, build=build)
    return PlannedUnit(
        name="benchmark",
        category="benchmark",
        type="command",
        phase="benchmark",
        tier=TIER_OF_PHASE["benchmark"],
        critical=False,
        terminal=True,
        stop_grace=_grace(spec, "benchmark"),
        instances=[inst],
        placement="client",
        nodes=[client.name],
        container=inst.container,
        timeout=spec.timeout_seconds,
    )
