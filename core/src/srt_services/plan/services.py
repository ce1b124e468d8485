"""A service's unit: its instances over the nodes or workers its placement selects.

Per service, what is the same for every instance is worked out once (:class:`_Instances`):
which kind methods are overridden and need a call, which recipe strings hold no
placeholder and can be copied, whether the placeholder values are needed at all. Each
instance then costs little more than a copy in the common case of a large generated recipe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.contracts.context import InstanceContext
from srt_services.contracts.kind import ServiceKind
from srt_services.contracts.plan import (
    LAST_TIER,
    TIER_OF_PHASE,
    PlannedBuild,
    PlannedInstance,
    PlannedRestart,
    PlannedUnit,
)
from srt_services.plan.probes import DEFAULT_INTERVAL, DEFAULT_TIMEOUT, planned_probe
from srt_services.plan.targets import endpoint_targets, metric_record
from srt_services.plan.values import (
    NO_OWN_NODES,
    LazyValues,
    OwnNodes,
    instance_values,
    joined_preamble,
    render_all,
    render_env,
    with_local_dir,
)
from srt_services.recipe.placeholders import render
from srt_services.recipe.problems import Problem
from srt_services.recipe.settled import bound
from srt_services.recipe.shell import ShellValueError, render_shell

if TYPE_CHECKING:
    from collections.abc import Mapping

    from srt_services.contracts.context import Node
    from srt_services.contracts.expansion import InstanceSeed
    from srt_services.contracts.plan import PlannedProbe
    from srt_services.plan.context import PlanContext
    from srt_services.recipe.models import MetricsSpec, Recipe, RestartSpec
    from srt_services.recipe.problems import Path
    from srt_services.recipe.settled import Settled


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
    plan = _Instances(ctx, s, unit, nodes, metrics, discovery)
    unit.instances = [plan.instance(index, seed) for index, seed in enumerate(seeds)]
    unit.container = unit.instances[0].container
    if plan.contexts:
        unit.fleet = _fleet(ctx, s, plan.contexts)
    if spec.source is not None:
        unit.build = _build(ctx, s, unit, seeds[0], plan.own)
    return unit


def effective_container(s: Settled, recipe: Recipe) -> str | None:
    """The service's image: its own, else its kind's fallback (the Mooncake stores run in
    the master's), else the job container unless the kind runs on the bare node."""
    spec = s.spec
    if spec.container:
        return spec.container
    if s.options is not None:
        fallback = s.kind.container_fallback(spec, s.options, recipe)
        if fallback:
            return fallback
    return None if s.kind.host_native else recipe.container


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
        src_dir=_src_dir(ctx, s),
        path=source.path,
        build_command=render_all(spec.build_command, values) or None,
        timeout=spec.build_timeout_seconds,
        nodes=list(unit.nodes),
        env=dict(unit.instances[0].env),
        scope=spec.build_scope,
    )


def _src_dir(ctx: PlanContext, s: Settled) -> str:
    """The checkout's root: the shared job directory's ``src/<name>``, or for a build on
    every node the node-local ``<local_dir root>/src/<name>`` (one ``<node>`` under it each,
    so virtual nodes on one machine do not share one)."""
    if s.spec.build_scope == "node":
        return f"{ctx.paths.local_job_dir}/src/{s.name}"
    return f"{ctx.paths.job_dir}/src/{s.name}"


_HOOKS = (
    "command",
    "default_env",
    "forced_env",
    "preamble",
    "readiness",
    "files",
    "fleet_readiness",
)
_OVERRIDES: dict[type, frozenset[str]] = {}


def _overridden(kind: ServiceKind) -> frozenset[str]:
    """Which per-instance kind methods a kind class overrides (the rest need no call)."""
    cls = type(kind)
    found = _OVERRIDES.get(cls)
    if found is None:
        found = frozenset(h for h in _HOOKS if getattr(cls, h) is not getattr(ServiceKind, h))
        _OVERRIDES[cls] = found
    return found


class _Instances:
    """Builds the instances of one service; what does not change between them is worked
    out once, here.

    A kind method is called only when the kind overrides it, and always with the
    instance's :class:`InstanceContext`, which exists whenever one is overridden or a probe
    is written. What does not change from one instance to the next is rendered once: the
    common case (no placeholder in the recipe's strings, a kind that adds none) then costs
    a copy. ``"{" in "".join(...)`` is one C-level scan instead of a generator per word.
    """

    __slots__ = (
        "at",
        "container",
        "contexts",
        "ctx",
        "cwd",
        "discovery",
        "eager",
        "env_base",
        "env_hooked",
        "files_hook",
        "hooks",
        "kind",
        "kind_ports",
        "liveness",
        "metrics",
        "metrics_written",
        "needs_ctx",
        "node_scope",
        "nodes",
        "options",
        "own",
        "owner",
        "preamble",
        "readiness",
        "recipe_env_static",
        "render_preamble",
        "s",
        "scraped_nodes",
        "spec",
        "static_argv",
        "static_env",
        "warned",
        "warnings",
        "words",
    )

    def __init__(
        self,
        ctx: PlanContext,
        s: Settled,
        unit: PlannedUnit,
        nodes: tuple[Node, ...],
        metrics: list[MetricsSpec],
        discovery: dict[str, str],
    ) -> None:
        spec = s.spec
        self.ctx = ctx
        self.s = s
        self.spec = spec
        self.kind = s.kind
        self.options = s.options
        self.nodes = nodes
        self.own = OwnNodes(nodes) if len(nodes) > 1 else NO_OWN_NODES
        self.at: Path = s.eff.label_path
        self.owner = unit.label
        self.warnings = unit.warnings
        self.warned: set[str] = set()
        self.metrics = metrics
        self.metrics_written = bool(spec.metrics)
        #: nodes whose targets are made (the first instance on a node serves them)
        self.scraped_nodes: set[str] = set()
        self.kind_ports = tuple(self.kind.listen_ports(spec, self.options))
        #: the checkout the instances run in: one per node (``node_scope``) or shared
        self.cwd: str | None = None
        self.node_scope = False
        if spec.source is not None:
            self.cwd = _src_dir(ctx, s)
            self.node_scope = spec.build_scope == "node"
        hooks = self.hooks = _overridden(self.kind)
        #: the argv's words when the recipe gives them all (``None``: the kind's command),
        #: and whether they hold no placeholder, so every instance has them as they are
        self.words: list[str] | None = None
        self.static_argv = False
        if "command" not in hooks or spec.command is not None:
            self.words = [*(spec.command or ()), *spec.args]
            self.static_argv = "{" not in "".join(self.words)
        self.discovery = discovery
        self.env_base: dict[str, str] = discovery if unit.inherit_discovery_env else {}
        self.recipe_env_static = "{" not in "".join(spec.env.values())
        self.env_hooked = bool(hooks & {"default_env", "forced_env"})
        self.static_env: dict[str, str] | None = None
        if self.recipe_env_static and not self.env_hooked:
            self.static_env = {**self.env_base, **spec.env}
        #: each instance renders its own preamble; else every instance has ``preamble``
        self.render_preamble = "preamble" in hooks or (
            spec.preamble is not None and "{" in spec.preamble
        )
        self.preamble = (
            joined_preamble(spec.preamble) if spec.preamble and not self.render_preamble else None
        )
        self.readiness = bound(spec.readiness, s.readiness, self.owner, "readiness")
        self.liveness = bound(spec.liveness, s.liveness, self.owner, "liveness")
        self.needs_ctx = bool(hooks) or self.readiness is not None or self.liveness is not None
        #: every instance's context, kept only for a kind with a fleet probe
        self.contexts: list[InstanceContext] = []
        self.container = effective_container(s, ctx.loaded.recipe)
        self.files_hook = "files" in hooks
        # Values are built lazily when only a hook or a probe might read them, and at once
        # when a recipe string will (a plain dict keeps ``format_map`` lookups in C).
        self.eager = (
            not self.static_argv
            or self.static_env is None
            or self.render_preamble
            or bool(self.container)
            or bool(spec.srun_options)
        )

    def instance(self, index: int, seed: InstanceSeed) -> PlannedInstance:
        ctx = self.ctx
        spec = self.spec
        worker = seed.worker
        step = seed.step
        node = seed.node
        rank = seed.worker_node_rank
        placement = self.s.placement
        values: Mapping[str, str] = (
            instance_values(ctx, node, index, placement, self.own, step, worker, rank)
            if self.eager
            else LazyValues(ctx, node, index, placement, self.own, step, worker, rank)
        )
        ictx = None
        if self.needs_ctx:
            ictx = InstanceContext(
                service=self.s.name,
                step=step,
                node=node,
                index=index,
                role=placement,
                nodes=self.nodes,
                layout=ctx.layout,
                paths=ctx.paths,
                worker=worker,
                worker_node_rank=rank,
                values=values,
                discovery_env=self.discovery,
                binaries=ctx.binaries,
            )
            if "fleet_readiness" in self.hooks:
                self.contexts.append(ictx)
        # the common case of each part inline: a call per part and instance shows in a
        # 10,000-service plan
        words = self.words
        if words is None:
            argv = self._kind_argv(values, ictx)
        else:
            argv = list(words) if self.static_argv else render_all(words, values)
        env = self.static_env
        if env is None:
            env = (
                self._kind_env(values, ictx)
                if self.env_hooked
                else {**self.env_base, **render_env(spec.env, values)}
            )
        if worker is not None and not worker.whole_node:
            env = {**env, "CUDA_VISIBLE_DEVICES": ",".join([str(g) for g in worker.gpus])}
        preamble = self._preamble(values, ictx) if self.render_preamble else self.preamble
        files = self._files(values, ictx) if ictx is not None and self.files_hook else {}
        if self.eager or self.needs_ctx:  # something was rendered: it may name {local_dir}
            preamble = with_local_dir(preamble, ctx.paths.local_dir(step), argv, env, files)
        readiness = liveness = None
        if ictx is not None:
            readiness, liveness = self._probes(ictx)
        container = self.container
        srun_options = spec.srun_options
        planned = PlannedInstance(
            step=step,
            unit=self.s.name,
            node=node.name,
            node_ip=node.ip,
            index=index,
            argv=argv,
            env=env,
            log=f"logs/{step}.out",
            work_dir=ctx.paths.work_dir(step),
            preamble=preamble,
            cwd=self._cwd(node.name) if self.cwd is not None else None,
            readiness=readiness,
            liveness=liveness,
            ports=self._claim_ports(index, node.name, step, readiness),
            files=files,
            worker=worker.key if worker else None,
            gpus=list(worker.gpus) if worker else None,
            container=render(container, values) if container else None,
            cpus_per_task=spec.cpus_per_task,
            cpu_bind=spec.cpu_bind,
            srun_options=(
                {k: render(v, values) for k, v in srun_options.items()} if srun_options else {}
            ),
            stop_signal=self.kind.stop_signal,
        )
        if self.metrics and node.name not in self.scraped_nodes:
            self.ctx.targets.extend(
                endpoint_targets(
                    self.metrics,
                    planned,
                    values,
                    unit=self.s.name,
                    role="service",
                    default_name=self.s.name,
                    first=not self.scraped_nodes,
                )
            )
            self.scraped_nodes.add(node.name)
        return planned

    def _cwd(self, node: str) -> str:
        """The instance's directory in its checkout (``source.path`` under it)."""
        source = self.spec.source
        assert self.cwd is not None
        assert source is not None
        root = f"{self.cwd}/{node}" if self.node_scope else self.cwd
        return f"{root}/{source.path}" if source.path else root

    def _kind_argv(self, values: Mapping[str, str], ictx: InstanceContext | None) -> list[str]:
        """The kind's command (the recipe writes none), then the recipe's args."""
        spec = self.spec
        command = None
        if ictx is not None:  # always there: the kind overrides ``command``
            command = self.kind.command(spec, self.options, ictx)
        return render_all(command, values) + render_all(spec.args, values)

    def _kind_env(self, values: Mapping[str, str], ictx: InstanceContext | None) -> dict[str, str]:
        """The kind's defaults, the recipe's env over them, what the kind forces over both."""
        spec = self.spec
        env = dict(self.env_base)
        if ictx is not None and "default_env" in self.hooks:
            env.update(render_env(self.kind.default_env(spec, self.options, ictx), values))
        env.update(spec.env if self.recipe_env_static else render_env(spec.env, values))
        if ictx is not None and "forced_env" in self.hooks:
            forced = render_env(self.kind.forced_env(spec, self.options, ictx), values)
            for key in forced:
                if key in spec.env and key not in self.warned:
                    self.warned.add(key)
                    self.warnings.append(
                        f"env.{key} is set by type {self.kind.name}; the recipe's value is ignored"
                    )
            env.update(forced)
        return env

    def _preamble(self, values: Mapping[str, str], ictx: InstanceContext | None) -> str | None:
        """The kind's preamble, then the recipe's: bash, so every value is quoted for the
        place its placeholder stands in (:mod:`srt_services.recipe.shell`)."""
        written = self.spec.preamble
        kind_part = None
        if ictx is not None and "preamble" in self.hooks:
            kind_part = self.kind.preamble(self.spec, self.options, ictx)
        try:
            return joined_preamble(
                render_shell(kind_part, values) if kind_part else None,
                render_shell(written, values) if written else None,
            )
        except ShellValueError as exc:
            problem = Problem((*self.at, "preamble"), str(exc))
            if problem not in self.ctx.problems:
                self.ctx.problems.append(problem)
            return None

    def _probes(self, ictx: InstanceContext) -> tuple[PlannedProbe | None, PlannedProbe | None]:
        """(readiness, liveness): the recipe's blocks, else the kind's default readiness."""
        ctx = self.ctx
        kind = self.kind
        default = None
        if "readiness" in self.hooks:
            default = kind.readiness(self.spec, self.options, ictx)
        readiness = planned_probe(
            ctx,
            self.readiness,
            default,
            ictx,
            None,
            kind.default_readiness_timeout,
            kind.default_readiness_interval,
            at=(*self.at, "readiness") if self.readiness is not None else self.at,
        )
        liveness = None
        if self.liveness is not None:
            liveness = planned_probe(
                ctx,
                self.liveness,
                None,
                ictx,
                None,
                DEFAULT_TIMEOUT,
                DEFAULT_INTERVAL,
                True,
                at=(*self.at, "liveness"),
            )
        return readiness, liveness

    def _claim_ports(
        self, index: int, node: str, step: str, readiness: PlannedProbe | None
    ) -> list[int]:
        """The instance's ports, each claimed in the ledger at the place the recipe says
        it (the first claim of a port wins the path)."""
        at = self.at
        claims: dict[int, Path] = dict.fromkeys(self.kind_ports, at) if self.kind_ports else {}
        if readiness is not None:
            rport = readiness.config.get("port")
            if isinstance(rport, int) and rport not in claims:
                claims[rport] = (*at, "readiness")
        for i, m in enumerate(self.metrics):
            if (m.nodes == "all" or index == 0) and m.port not in claims:
                claims[m.port] = (*at, "metrics", i) if self.metrics_written else at
        claim = self.ctx.ledger.claim
        owner = self.owner
        for port, where in claims.items():
            claim(node, port, owner, step, where)
        return list(claims)

    def _files(self, values: Mapping[str, str], ictx: InstanceContext) -> dict[str, str]:
        files = self.kind.files(self.spec, self.options, ictx)
        # a name may be ``{log_dir}/x`` (a file the spec puts beside the logs): rendered too
        return {render(k, values): render(v, values) for k, v in files.items()}
