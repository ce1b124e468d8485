"""The instances of one service, with what is the same for all of them worked out once.

Per service, :class:`Instances` settles each part of a :class:`PlannedInstance` (argv,
environment, preamble, files, probes, ports, scrape targets, the kind's instance context):
a part that every instance shares is computed here once (``static_argv``, ``static_env``,
``static_preamble``: a recipe string without a placeholder is copied, not rendered); a part
that differs between instances gets a small object that makes it per instance (``_Argv``,
``_Env``, ``_Preamble``, ``_Probes``, ``_Ports``...), created only for a service that needs
it. A kind method is called only when the kind overrides it (``_Kind`` exists only then),
and always with the instance's :class:`InstanceContext`, which exists whenever one is
overridden or a probe is written. In the common case of a large generated recipe an
instance costs little more than a copy; the cheap branch of each part stays inline in
:meth:`Instances.instance` (a call per part and instance shows in a 10,000-service plan).
``"{" in "".join(...)`` is one C-level scan instead of a generator per word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.checking.settled import bound
from srt_services.contracts.context import InstanceContext
from srt_services.contracts.kind import ServiceKind
from srt_services.contracts.plan import PlannedInstance
from srt_services.plan.probes import DEFAULT_INTERVAL, DEFAULT_TIMEOUT, planned_probe
from srt_services.plan.targets import endpoint_targets
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
from srt_services.recipe.shell import ShellValueError, render_shell

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from srt_services.checking.settled import ProbeBinding, Settled
    from srt_services.contracts.context import Node
    from srt_services.contracts.expansion import InstanceSeed
    from srt_services.contracts.kind import DefaultProbe
    from srt_services.contracts.plan import PlannedProbe, PlannedUnit
    from srt_services.plan.context import PlanContext
    from srt_services.recipe.models import MetricsSpec, Recipe, ServiceSpec
    from srt_services.recipe.problems import Path, ProblemList

#: The per-instance kind methods: one that a kind does not override needs no call.
KIND_HOOKS = (
    "command",
    "default_env",
    "forced_env",
    "preamble",
    "readiness",
    "files",
    "fleet_readiness",
)
_OVERRIDES: dict[type, frozenset[str]] = {}


def overridden(kind: ServiceKind) -> frozenset[str]:
    """Which per-instance kind methods a kind class overrides (the rest need no call)."""
    cls = type(kind)
    found = _OVERRIDES.get(cls)
    if found is None:
        found = frozenset(h for h in KIND_HOOKS if getattr(cls, h) is not getattr(ServiceKind, h))
        _OVERRIDES[cls] = found
    return found


def src_dir(ctx: PlanContext, s: Settled) -> str:
    """The checkout's root: the shared job directory's ``src/<name>``, or for a build on
    every node the node-local ``<local_dir root>/src/<name>`` (one ``<node>`` under it each,
    so virtual nodes on one machine do not share one)."""
    if s.spec.build_scope == "node":
        return f"{ctx.paths.local_job_dir}/src/{s.name}"
    return f"{ctx.paths.job_dir}/src/{s.name}"


def has_placeholder(words: Iterable[str]) -> bool:
    """Whether any of ``words`` (strings) holds a placeholder."""
    return "{" in "".join(words)


# --------------------------------------------------------------------------- the parts


class _Kind:
    """The kind's per-instance methods, for a kind that overrides at least one of them (the
    others are never called)."""

    __slots__ = ("hooks", "kind", "options", "spec", "warned", "warnings")

    def __init__(self, s: Settled, hooks: frozenset[str], warnings: list[str]) -> None:
        self.kind = s.kind
        self.spec: ServiceSpec = s.spec
        self.options = s.options
        self.hooks = hooks
        #: the unit's warnings, and the forced env keys already warned about
        self.warnings = warnings
        self.warned: set[str] = set()

    def command(self, ictx: InstanceContext) -> list[str] | None:
        return self.kind.command(self.spec, self.options, ictx)

    def default_env(self, ictx: InstanceContext) -> dict[str, str]:
        return self.kind.default_env(self.spec, self.options, ictx)

    def forced_env(self, ictx: InstanceContext, values: Mapping[str, str]) -> dict[str, str]:
        """What the kind forces, rendered; a recipe value it overrides is warned about once."""
        forced = render_env(self.kind.forced_env(self.spec, self.options, ictx), values)
        for key in forced:
            if key in self.spec.env and key not in self.warned:
                self.warned.add(key)
                self.warnings.append(
                    f"env.{key} is set by type {self.kind.name}; the recipe's value is ignored"
                )
        return forced

    def preamble(self, ictx: InstanceContext) -> str | None:
        return self.kind.preamble(self.spec, self.options, ictx)

    def files(self, ictx: InstanceContext, values: Mapping[str, str]) -> dict[str, str]:
        """The files the kind writes for an instance (a server's config file); a name may be
        ``{log_dir}/x`` (a file the spec puts beside the logs), so names are rendered too."""
        files = self.kind.files(self.spec, self.options, ictx)
        return {render(k, values): render(v, values) for k, v in files.items()}

    def readiness(self, ictx: InstanceContext) -> DefaultProbe | None:
        return self.kind.readiness(self.spec, self.options, ictx)


class _Argv:
    """An argv that differs between instances: the recipe's words rendered, or (the recipe
    writes no command) the kind's command then the recipe's args."""

    __slots__ = ("args", "kind", "words")

    def __init__(self, words: list[str] | None, args: list[str], kind: _Kind | None) -> None:
        self.words = words
        self.args = args
        self.kind = kind

    def render(self, values: Mapping[str, str], ictx: InstanceContext | None) -> list[str]:
        if self.words is not None:
            return render_all(self.words, values)
        command = None
        if self.kind is not None and ictx is not None:  # both there: the kind has ``command``
            command = self.kind.command(ictx)
        return render_all(command, values) + render_all(self.args, values)


class _Env:
    """An environment that differs between instances: the inherited discovery env, the
    kind's defaults, the recipe's env over them, what the kind forces over both. ``kind`` is
    there only for a kind with env methods."""

    __slots__ = ("base", "kind", "recipe", "recipe_static")

    def __init__(
        self, base: dict[str, str], recipe: dict[str, str], static: bool, kind: _Kind | None
    ) -> None:
        self.base = base
        self.recipe = recipe
        self.recipe_static = static
        self.kind = kind

    def render(self, values: Mapping[str, str], ictx: InstanceContext | None) -> dict[str, str]:
        kind = self.kind
        if kind is None:
            return {**self.base, **render_env(self.recipe, values)}
        env = dict(self.base)
        if ictx is not None and "default_env" in kind.hooks:
            env.update(render_env(kind.default_env(ictx), values))
        env.update(self.recipe if self.recipe_static else render_env(self.recipe, values))
        if ictx is not None and "forced_env" in kind.hooks:
            env.update(kind.forced_env(ictx, values))
        return env


class _Preamble:
    """A preamble that differs between instances: the kind's, then the recipe's. Bash, so
    every value is quoted for the place its placeholder stands in
    (:mod:`srt_services.recipe.shell`); a value that cannot be is a problem at the
    recipe's ``preamble``."""

    __slots__ = ("at", "kind", "problems", "written")

    def __init__(
        self, written: str | None, kind: _Kind | None, at: Path, problems: ProblemList
    ) -> None:
        self.written = written
        self.kind = kind
        self.at = at
        self.problems = problems

    def render(self, values: Mapping[str, str], ictx: InstanceContext | None) -> str | None:
        written = self.written
        kind_part = None
        if self.kind is not None and ictx is not None:
            kind_part = self.kind.preamble(ictx)
        try:
            return joined_preamble(
                render_shell(kind_part, values) if kind_part else None,
                render_shell(written, values) if written else None,
            )
        except ShellValueError as exc:
            problem = Problem((*self.at, "preamble"), str(exc))
            if problem not in self.problems:
                self.problems.append(problem)
            return None


class _Probes:
    """(readiness, liveness) of an instance: the recipe's blocks, else the kind's default
    readiness (``kind``: there when the kind has one)."""

    __slots__ = ("at", "ctx", "kind", "liveness", "readiness", "service_kind", "timing")

    def __init__(
        self,
        ctx: PlanContext,
        s: Settled,
        kind: _Kind | None,
        readiness: ProbeBinding | None,
        liveness: ProbeBinding | None,
    ) -> None:
        self.ctx = ctx
        self.service_kind = s.kind
        self.kind = kind
        self.at: Path = s.eff.label_path
        self.readiness = readiness
        self.liveness = liveness
        self.timing = s.readiness_timing

    def planned(self, ictx: InstanceContext) -> tuple[PlannedProbe | None, PlannedProbe | None]:
        service_kind = self.service_kind
        default = self.kind.readiness(ictx) if self.kind is not None else None
        readiness = planned_probe(
            self.ctx,
            self.readiness,
            default,
            ictx,
            None,
            service_kind.default_readiness_timeout,
            service_kind.default_readiness_interval,
            at=(*self.at, "readiness") if self.readiness is not None else self.at,
            timing=self.timing,
        )
        if readiness is None and self.timing is not None:
            problem = Problem(
                (*self.at, "readiness"),
                f"gives only timing, but kind {service_kind.name} asks for no probe here;"
                " name a probe (port, tcp, http, log or file)",
            )
            if problem not in self.ctx.problems:
                self.ctx.problems.append(problem)
        liveness = None
        if self.liveness is not None:
            liveness = planned_probe(
                self.ctx,
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


class _Contexts:
    """Each instance's :class:`InstanceContext` (for the kind's methods and the probes),
    kept for a kind with a fleet probe (``kept``)."""

    __slots__ = ("container", "ctx", "discovery", "keep", "kept", "name", "nodes")

    def __init__(
        self,
        ctx: PlanContext,
        name: str,
        nodes: tuple[Node, ...],
        discovery: dict[str, str],
        keep: bool,
        container: str | None = None,
    ) -> None:
        self.container = container
        self.ctx = ctx
        self.name = name
        self.nodes = nodes
        self.discovery = discovery
        self.keep = keep
        self.kept: list[InstanceContext] = []

    def make(
        self, index: int, seed: InstanceSeed, role: str, values: Mapping[str, str]
    ) -> InstanceContext:
        ctx = self.ctx
        ictx = InstanceContext(
            service=self.name,
            step=seed.step,
            node=seed.node,
            index=index,
            role=role,
            nodes=self.nodes,
            layout=ctx.layout,
            paths=ctx.paths,
            worker=seed.worker,
            worker_node_rank=seed.worker_node_rank,
            values=values,
            discovery_env=self.discovery,
            binaries=ctx.binaries,
            container=self.container,
        )
        if self.keep:
            self.kept.append(ictx)
        return ictx


class _Ports:
    """An instance's ports, each claimed in the ledger at the place the recipe says it (the
    first claim of a port wins the path): the kind's listen ports, the readiness probe's,
    the metrics endpoints' (those on every node, else the first instance's)."""

    __slots__ = ("at", "claim_port", "kind_ports", "metrics", "metrics_written", "owner")

    def __init__(
        self, ctx: PlanContext, s: Settled, owner: str, metrics: list[MetricsSpec]
    ) -> None:
        self.at: Path = s.eff.label_path
        self.owner = owner
        self.kind_ports = tuple(s.kind.listen_ports(s.spec, s.options))
        self.metrics = metrics
        self.metrics_written = bool(s.spec.metrics)
        self.claim_port = ctx.ledger.claim

    def claim(self, index: int, node: str, step: str, readiness: PlannedProbe | None) -> list[int]:
        at = self.at
        claims: dict[int, Path] = dict.fromkeys(self.kind_ports, at) if self.kind_ports else {}
        if readiness is not None:
            rport = readiness.config.get("port")
            if isinstance(rport, int) and rport not in claims:
                claims[rport] = (*at, "readiness")
        for i, m in enumerate(self.metrics):
            if (m.nodes == "all" or index == 0) and m.port not in claims:
                claims[m.port] = (*at, "metrics", i) if self.metrics_written else at
        claim = self.claim_port
        owner = self.owner
        for port, where in claims.items():
            claim(node, port, owner, step, where)
        return list(claims)


class _Targets:
    """The service's scrape targets, made by the first instance on each node."""

    __slots__ = ("metrics", "name", "scraped", "targets")

    def __init__(self, ctx: PlanContext, name: str, metrics: list[MetricsSpec]) -> None:
        self.name = name
        self.metrics = metrics
        self.targets = ctx.targets
        self.scraped: set[str] = set()

    def add(self, planned: PlannedInstance, values: Mapping[str, str]) -> None:
        node = planned.node
        if node in self.scraped:
            return
        self.targets.extend(
            endpoint_targets(
                self.metrics,
                planned,
                values,
                unit=self.name,
                role="service",
                default_name=self.name,
                first=not self.scraped,
            )
        )
        self.scraped.add(node)


class _Checkout:
    """The directory an instance of a service built from source runs in: its checkout
    (one per node for a node-scoped build), ``source.path`` under it."""

    __slots__ = ("node_scope", "path", "root")

    def __init__(self, ctx: PlanContext, s: Settled) -> None:
        source = s.spec.source
        assert source is not None
        self.root = src_dir(ctx, s)
        self.node_scope = s.spec.build_scope == "node"
        self.path = source.path

    def cwd(self, node: str) -> str:
        root = f"{self.root}/{node}" if self.node_scope else self.root
        return f"{root}/{self.path}" if self.path else root


# --------------------------------------------------------------------------- the service

#: The kind methods that make the environment.
_ENV_HOOKS = frozenset({"default_env", "forced_env"})


class Instances:
    """Makes the instances of one service.

    What every instance shares is worked out here, once: ``static_argv``, ``static_env``
    and ``static_preamble`` when no instance renders its own (the parts ``argv``, ``env``
    and ``preamble`` are then ``None``); the kind's methods (:class:`_Kind`) only for a kind
    that overrides one; ``contexts`` and ``probes`` only when something reads a context.
    """

    __slots__ = (
        "argv",
        "checkout",
        "container",
        "contexts",
        "ctx",
        "eager",
        "env",
        "files",
        "own",
        "placement",
        "ports",
        "preamble",
        "probes",
        "s",
        "static_argv",
        "static_env",
        "static_preamble",
        "targets",
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
        hooks = overridden(s.kind)
        kind = _Kind(s, hooks, unit.warnings) if hooks else None
        self.ctx = ctx
        self.s = s
        self.placement = s.placement
        self.own = OwnNodes(nodes) if len(nodes) > 1 else NO_OWN_NODES
        self._plan_argv(kind)
        self._plan_env(kind, discovery if unit.inherit_discovery_env else {})
        self._plan_preamble(kind)
        self.files = kind if kind is not None and "files" in hooks else None
        self.container = effective_container(s, ctx.loaded.recipe, ctx.containers)
        self._plan_contexts(kind, unit.label, nodes, discovery)
        self.ports = _Ports(ctx, s, unit.label, metrics)
        self.targets = _Targets(ctx, s.name, metrics) if metrics else None
        self.checkout = _Checkout(ctx, s) if s.spec.source is not None else None
        # Values are built lazily when only a hook or a probe might read them, and at once
        # when a recipe string will (a plain dict keeps ``format_map`` lookups in C).
        self.eager = (
            self.argv is not None
            or self.env is not None
            or self.preamble is not None
            or bool(self.container)
            or bool(s.spec.srun_options)
        )

    def _plan_argv(self, kind: _Kind | None) -> None:
        """The recipe's words when they are the whole argv (the recipe writes a command, or
        the kind has none): as they are when they hold no placeholder."""
        spec = self.s.spec
        self.static_argv: list[str] = []
        self.argv: _Argv | None = None
        words = None
        if kind is None or "command" not in kind.hooks or spec.command is not None:
            words = [*(spec.command or ()), *spec.args]
            if not has_placeholder(words):
                self.static_argv = words
                return
        self.argv = _Argv(words, spec.args, kind)

    def _plan_env(self, kind: _Kind | None, base: dict[str, str]) -> None:
        """One env for every instance (one dict, shared) when the kind adds none and the
        recipe's values hold no placeholder."""
        recipe = self.s.spec.env
        static = not has_placeholder(recipe.values())
        env_kind = kind if kind is not None and kind.hooks & _ENV_HOOKS else None
        self.static_env: dict[str, str] = {}
        self.env: _Env | None = None
        if static and env_kind is None:
            self.static_env = {**base, **recipe}
        else:
            self.env = _Env(base, recipe, static, env_kind)

    def _plan_preamble(self, kind: _Kind | None) -> None:
        """One preamble for every instance unless the kind writes one or the recipe's has a
        placeholder."""
        s = self.s
        written = s.spec.preamble
        self.static_preamble: str | None = None
        self.preamble: _Preamble | None = None
        if kind is not None and "preamble" in kind.hooks:
            self.preamble = _Preamble(written, kind, s.eff.label_path, self.ctx.problems)
        elif written is not None and "{" in written:
            self.preamble = _Preamble(written, None, s.eff.label_path, self.ctx.problems)
        elif written:
            self.static_preamble = joined_preamble(written)

    def _plan_contexts(
        self, kind: _Kind | None, owner: str, nodes: tuple[Node, ...], discovery: dict[str, str]
    ) -> None:
        """Instance contexts and probes, when a kind method or a written probe reads them."""
        s = self.s
        written = s.spec.readiness if s.readiness_timing is None else None
        readiness = bound(written, s.readiness, owner, "readiness")
        liveness = bound(s.spec.liveness, s.liveness, owner, "liveness")
        self.contexts: _Contexts | None = None
        self.probes: _Probes | None = None
        if kind is None and readiness is None and liveness is None:
            # a timing-only readiness without a kind probe was refused by the checks
            return
        keep = kind is not None and "fleet_readiness" in kind.hooks
        image = self.container if self.ctx.containers else None
        self.contexts = _Contexts(self.ctx, s.name, nodes, discovery, keep, image)
        probe_kind = kind if kind is not None and "readiness" in kind.hooks else None
        self.probes = _Probes(self.ctx, s, probe_kind, readiness, liveness)

    @property
    def fleet_contexts(self) -> list[InstanceContext]:
        """Every instance's context, for a kind with a fleet probe (else empty)."""
        return self.contexts.kept if self.contexts is not None else []

    def instance(self, index: int, seed: InstanceSeed) -> PlannedInstance:
        ctx = self.ctx
        spec = self.s.spec
        step = seed.step
        node = seed.node
        worker = seed.worker
        rank = seed.worker_node_rank
        role = self.placement
        own = self.own
        values: Mapping[str, str] = (
            instance_values(ctx, node, index, role, own, step, worker, rank)
            if self.eager
            else LazyValues(ctx, node, index, role, own, step, worker, rank)
        )
        contexts = self.contexts
        ictx = contexts.make(index, seed, role, values) if contexts is not None else None
        # the cheap branch of each part inline (see the module's docstring)
        argv = list(self.static_argv) if self.argv is None else self.argv.render(values, ictx)
        env = self.static_env if self.env is None else self.env.render(values, ictx)
        if worker is not None and not worker.whole_node:
            env = {**env, "CUDA_VISIBLE_DEVICES": ",".join([str(g) for g in worker.gpus])}
        preamble = self.preamble
        text = self.static_preamble if preamble is None else preamble.render(values, ictx)
        files = (
            self.files.files(ictx, values) if self.files is not None and ictx is not None else {}
        )
        if self.eager or ictx is not None:  # something was rendered: it may name {local_dir}
            text = with_local_dir(text, ctx.paths.local_dir(step), argv, env, files)
        readiness = liveness = None
        if ictx is not None and self.probes is not None:
            readiness, liveness = self.probes.planned(ictx)
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
            preamble=text,
            cwd=self.checkout.cwd(node.name) if self.checkout is not None else None,
            readiness=readiness,
            liveness=liveness,
            ports=self.ports.claim(index, node.name, step, readiness),
            files=files,
            worker=worker.key if worker else None,
            gpus=list(worker.gpus) if worker else None,
            container=render(container, values) if container else None,
            cpus_per_task=spec.cpus_per_task,
            cpu_bind=spec.cpu_bind,
            srun_options=(
                {k: render(v, values) for k, v in srun_options.items()} if srun_options else {}
            ),
            stop_signal=self.s.kind.stop_signal,
            mounts=ctx.mounts if container else [],
        )
        if self.targets is not None:
            self.targets.add(planned, values)
        return planned


def effective_container(s: Settled, recipe: Recipe, containers: bool = True) -> str | None:
    """The service's image: its own, else its kind's fallback (the Mooncake stores run in
    the master's), else the job container unless the kind runs on the bare node.

    Where the launcher runs no images (``containers`` false: a local run), a host-native
    kind has none but the one its entry writes: its fallback (an exporter's upstream image)
    is for clusters, and on this machine it runs its host binary."""
    spec = s.spec
    if spec.container:
        return spec.container
    if not containers and s.kind.host_native:
        return None
    if s.options is not None:
        fallback = s.kind.container_fallback(spec, s.options, recipe)
        if fallback:
            return fallback
    return None if s.kind.host_native else recipe.container
