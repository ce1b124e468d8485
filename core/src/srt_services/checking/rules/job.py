"""Rules of the job's own processes: the frontend, the benchmark and the roles' workers
(and the job container they run in).

The services these settings imply (etcd for a Dynamo frontend, NATS for its planes...) are
checked against the installed plugins in :mod:`.implied_kinds`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.checking.rules import metrics, strings
from srt_services.checking.settled import JobProbes, ProbeBinding
from srt_services.names import NEVER_BY_PATTERN
from srt_services.recipe import placeholders as ph

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.checking.rules.probes import ProbeRules
    from srt_services.recipe.models import RoleSpec
    from srt_services.recipe.problems import Path


def check_job(ctx: RuleContext, probes: ProbeRules) -> JobProbes:
    """Every rule of the frontend, the planes, the benchmark and the roles."""
    bound = JobProbes()
    if ctx.recipe.container:
        strings.text(ctx, ("container",), ctx.recipe.container, ph.COMMON)
    for i, mount in enumerate(ctx.recipe.mounts):
        strings.text(ctx, ("mounts", i), mount, ph.COMMON)
        parts = mount.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]) or not parts[1].startswith("/"):
            ctx.add(
                ("mounts", i),
                f"must be host:container[:options] with an absolute container path, got {mount!r}",
            )
    _passthrough(ctx)
    bound.frontend = _frontend(ctx, probes)
    _benchmark(ctx)
    for role, spec in ctx.recipe.roles.items():
        binding = _role(ctx, probes, role, spec)
        if binding is not None:
            bound.roles[role] = binding
    return bound


def _passthrough(ctx: RuleContext) -> None:
    """``env_passthrough`` entries srt cannot honour: its own names, and the loader
    variables it refuses in ``env`` too (``LD_LIBRARY_PATH`` is fine: the usual reason to
    pass one through)."""
    for i, entry in enumerate(ctx.recipe.env_passthrough):
        if entry.startswith("SRT_"):
            ctx.add(
                ("env_passthrough", i),
                "names starting with SRT_ are srt's own (each job sets its own); a pattern"
                " such as S* passes none of them either",
            )
        elif entry in NEVER_BY_PATTERN:
            ctx.add(
                ("env_passthrough", i),
                f"{entry} changes how every program of the job is loaded, so srt does not"
                " pass it through; export it in a `preamble` if you really mean it",
            )


def _frontend(ctx: RuleContext, probes: ProbeRules) -> ProbeBinding | None:
    r = ctx.recipe
    ftype = r.frontend_type
    binding = None
    if ftype == "none":
        if r.roles:
            ctx.add(
                ("frontend", "type") if r.frontend else ("roles",),
                "engine workers need a frontend (frontend.type dynamo, sglang or vllm);"
                " `none` is only for jobs without roles",
            )
    elif r.frontend is not None:
        strings.process(ctx, ("frontend",), r.frontend, allowed=ph.COMMON)
        metrics.endpoints(ctx, ("frontend",), r.frontend.metrics, ph.COMMON)
        binding = probes.bind(
            ("frontend", "readiness"), r.frontend.readiness, r.frontend.port, False
        )
    return binding


def _benchmark(ctx: RuleContext) -> None:
    b = ctx.recipe.benchmark
    if b.type == "command" and b.command is None:
        ctx.add(("benchmark", "command"), "is required for benchmark.type command")
    if b.type == "manual" and b.command is not None:
        ctx.add(
            ("benchmark", "type"),
            "is manual, so benchmark.command would never run; set type: command",
        )
    strings.process(ctx, ("benchmark",), b, allowed=ph.COMMON)


def _role(ctx: RuleContext, probes: ProbeRules, role: str, spec: RoleSpec) -> ProbeBinding | None:
    where: Path = ("roles", role)
    _role_width(ctx, where, spec)
    strings.process(ctx, where, spec, allowed=ph.ALL)
    metrics.endpoints(ctx, where, spec.metrics, ph.ALL)
    return probes.bind((*where, "readiness"), spec.readiness, spec.port, False)


def _role_width(ctx: RuleContext, where: Path, spec: RoleSpec) -> None:
    """Workers, GPUs per worker and nodes must fit whole nodes without leaving one idle
    (the packed layout pools the nodes and reports what stays idle when it plans)."""
    if ctx.recipe.resources.layout == "packed":
        return
    gpn = ctx.recipe.resources.gpus_per_node
    g = spec.gpus_per_worker or gpn
    if g > gpn:
        if g % gpn:
            ctx.add(
                (*where, "gpus_per_worker"),
                f"a worker wider than a node must use whole nodes: {g} is not a multiple of"
                f" resources.gpus_per_node ({gpn})",
            )
        elif spec.nodes is not None and spec.nodes != spec.workers * (g // gpn):
            ctx.add(
                (*where, "nodes"),
                f"{spec.workers} worker(s) of {g} GPUs need exactly"
                f" {spec.workers * (g // gpn)} node(s) of {gpn} GPUs; got {spec.nodes}",
            )
    elif spec.nodes is not None:
        per_node = gpn // g
        needed = -(-spec.workers // per_node)
        if spec.nodes < needed:
            ctx.add(
                (*where, "nodes"),
                f"{spec.workers} worker(s) of {g} GPUs need at least {needed} node(s) of"
                f" {gpn} GPUs; got {spec.nodes}",
            )
        elif spec.nodes > spec.workers:
            ctx.add(
                (*where, "nodes"),
                f"{spec.nodes} nodes for {spec.workers} worker(s) would leave nodes idle",
            )
