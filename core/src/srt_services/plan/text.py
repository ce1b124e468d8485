"""The dry-run text: a Plan as a reviewer wants to read it.

Plain text (stable for golden tests and for pasting into a ticket); it shows the *effective*
values the runtime will use: rendered argv, the layered environment, the probe with its
resolved address, metrics targets, and for implied services why they are there.
"""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterator, Mapping

from srt_services.contracts.plan import (
    LAST_TIER,
    PHASE_ORDER,
    Plan,
    PlannedBuild,
    PlannedInstance,
    PlannedProbe,
    PlannedUnit,
)
from srt_services.plan.launch_paths import own_step_reason

PHASE_TITLES = {
    "infra": "infra",
    "before_workers": "before_workers",
    "workers": "workers",
    "frontend": "frontend",
    "after_frontend": "after_frontend",
    "benchmark": "benchmark",
}


def _probe(p: PlannedProbe | None) -> str:
    if p is None:
        return "none (started once launched)"
    return f"{p.describe}, timeout {p.timeout:g}s, interval {p.interval:g}s"


def _env_lines(env: dict[str, str], indent: str) -> Iterator[str]:
    if not env:
        yield f"{indent}env: (none)"
        return
    yield f"{indent}env:"
    for key in sorted(env):
        yield f"{indent}  {key}={env[key]}"


def _instance_lines(
    inst: PlannedInstance, first: PlannedInstance, indent: str, agents: bool = False
) -> Iterator[str]:
    """An instance: the first one in full, the others by what differs from the first."""
    where = f"{inst.step} on {inst.node} ({inst.node_ip})"
    if inst.nodes:
        per = inst.tasks_per_node or 1
        where += f" and {','.join(inst.nodes[1:])}: one launch of {per} task(s) per node"
    if inst.worker:
        where += f" for worker {inst.worker} gpus {','.join(map(str, inst.gpus or []))}"
    if agents and inst.via == "step":
        where += f" [own srun step: {own_step_reason(inst) or 'asked for'}]"
    yield f"{indent}- {where}"
    sub = indent + "  "
    if inst is first:
        yield from _first_instance_lines(inst, sub)
        return
    if inst.argv != first.argv:
        yield f"{sub}command: {shlex.join(inst.argv) if inst.argv else '(none)'}"
    if inst.preamble and inst.preamble != first.preamble:
        yield f"{sub}preamble: {inst.preamble!r}"
    if inst.readiness and first.readiness and inst.readiness.describe != first.readiness.describe:
        yield f"{sub}readiness: {_probe(inst.readiness)}"
    diff = {k: v for k, v in inst.env.items() if first.env.get(k) != v}
    for key in sorted(diff):
        yield f"{sub}env {key}={diff[key]}"


def _first_instance_lines(inst: PlannedInstance, sub: str) -> Iterator[str]:
    yield f"{sub}command: {shlex.join(inst.argv) if inst.argv else '(none)'}"
    if inst.preamble:
        yield f"{sub}preamble: {inst.preamble!r}"
    if inst.cwd:
        yield f"{sub}cwd: {inst.cwd}"
    yield f"{sub}readiness: {_probe(inst.readiness)}"
    if inst.liveness:
        yield (
            f"{sub}liveness: {inst.liveness.describe}, every {inst.liveness.period:g}s,"
            f" {inst.liveness.failure_threshold} failures"
        )
    yield from _env_lines(inst.env, sub)
    if inst.ports:
        yield f"{sub}ports: {', '.join(map(str, inst.ports))}"
    for name in sorted(inst.files):
        yield f"{sub}file {_file_path(inst.work_dir, name)} ({len(inst.files[name])} bytes)"


def _file_path(work_dir: str, name: str) -> str:
    """Where a kind's file lands, as write_files puts it: a ``{log_dir}`` file is an
    absolute name. A dry run's job directory is the word ``<job_dir>`` (not absolute), so a
    name under it is the whole path too, not one more level under the work directory."""
    root = work_dir.split("/", 1)[0]
    if root and name.startswith(root + "/"):
        return name
    return posixpath.join(work_dir, name)


def _unit_head(unit: PlannedUnit) -> str:
    head = f"  {unit.name}  type={unit.type}"
    if unit.placement:
        head += f" placement={unit.placement}"
    if unit.per and unit.per != "node":
        head += f" per={unit.per}"
    if unit.pool:
        head += f" pool={unit.pool}"
    head += f" start={unit.phase} critical={'true' if unit.critical else 'false'}"
    if unit.terminal:
        head += " terminal"
    if unit.metrics:
        parts = []
        for m in unit.metrics:
            part = f"{m.get('name') or ''}:{m['port']}{m['path']}"
            if m["nodes"] == "first":
                part += "@first"
            parts.append(part)
        head += " metrics=" + ",".join(parts)
    return head


def _container(image: str | None, aliases: Mapping[str, str]) -> str:
    """The effective image, with the site alias it stands for (what srun is given)."""
    if not image:
        return "none (runs on the node itself)"
    resolved = aliases.get(image)
    return f"{image} (site alias of {resolved})" if resolved and resolved != image else image


def _unit_lines(
    unit: PlannedUnit, aliases: Mapping[str, str], agents: bool = False
) -> Iterator[str]:
    yield _unit_head(unit)
    yield from _origin_lines(unit)
    if unit.external:
        yield f"    external: {unit.external} (not launched)"
        return
    yield from _after_lines(unit.after)
    yield f"    nodes: {', '.join(unit.nodes)}"
    yield f"    container: {_container(unit.container, aliases)}"
    if unit.build:
        yield from _build_lines(unit.build)
    yield from _lifecycle_lines(unit)
    if unit.fleet is not None:
        yield f"    fleet readiness: {_probe(unit.fleet)} (once every instance is ready)"
    if unit.category == "service" and unit.instances:
        yield f"    inherit_discovery_env: {'true' if unit.inherit_discovery_env else 'false'}"
    for inst in unit.instances:
        yield from _instance_lines(inst, unit.instances[0], "    ", agents)


def _origin_lines(unit: PlannedUnit) -> Iterator[str]:
    """Which implied service the unit is, or replaces."""
    if unit.implied_by:
        yield f"    implied by: {unit.implied_by} (declare a service named {unit.name} to change it)"
    if unit.replaces_implied:
        yield f"    replaces the service implied by: {unit.replaces_implied}"


def _after_lines(after: list[str] | None) -> Iterator[str]:
    """What the unit starts after, when the recipe says it (``None``: it does not)."""
    if after is None:
        return
    if after:
        yield f"    after: {', '.join(after)} (not the service declared before it)"
    else:
        yield "    after: - (starts with its phase, not after the service declared before it)"


def _build_lines(b: PlannedBuild) -> Iterator[str]:
    yield f"    source: {b.git} @ {b.rev}" + (
        f" (commit {b.checkout})" if b.checkout != b.rev else ""
    )
    if b.path:
        yield f"    source.path: {b.path}"
    where = (
        f"shared, once in {b.src_dir}"
        if b.scope == "shared"
        else f"node, on each of {', '.join(b.nodes)} in {b.src_dir}/<node>"
    )
    yield f"    build_scope: {where}"
    if b.build_command:
        yield f"    build_command: {shlex.join(b.build_command)} (timeout {b.timeout:g}s)"


def _lifecycle_lines(unit: PlannedUnit) -> Iterator[str]:
    """Restarts, time limit, how it is stopped; its options and warnings."""
    if unit.restart:
        r = unit.restart
        yield (
            f"    restart: {r.policy}, backoff {r.backoff_initial:g}s..{r.backoff_max:g}s,"
            f" at most {r.max_failures} failures in {r.window:g}s"
        )
    if unit.timeout:
        yield f"    timeout: {unit.timeout:g}s"
    last = " (after everything else)" if unit.tier == LAST_TIER else ""
    yield f"    stop: SIGTERM, SIGKILL after {unit.stop_grace:g}s (tier {unit.tier}){last}"
    if unit.options:
        yield f"    options: {unit.options}"
    for warning in unit.warnings:
        yield f"    warning: {warning}"


def render_plan(
    plan: Plan, only: frozenset[str] | None = None, aliases: Mapping[str, str] | None = None
) -> str:
    """The whole plan, or with ``only`` the named units (and their metrics targets) under
    the job line: a reviewer of a 10,000-service recipe wants one service, not 130k lines.
    ``aliases`` are the site's container aliases, shown next to the images that use one."""
    lines = [
        f"Job {plan.job_name}: {len(plan.nodes)} node(s), {plan.allocation} allocation;"
        f" head {plan.head}, infra {plan.infra}, client {plan.client}",
    ]
    if plan.slurm_launcher is not None:
        lines.append(_launcher_line(plan))
    if only is None:
        lines.extend(_overview_lines(plan))
    by_name = {u.name: u for u in plan.units}
    agents = plan.slurm_launcher == "agents"
    for phase in PHASE_ORDER:
        names = [n for n in plan.phases.get(phase, []) if only is None or n in only]
        if not names:
            continue
        lines.append(f"Phase {phase}:")
        for name in names:
            lines.extend(_unit_lines(by_name[name], aliases or {}, agents))
    targets = [t for t in plan.scrape_targets if only is None or t.service in only]
    if targets:
        lines.append("Metrics targets:")
        lines.extend(f"  {t.name}  {t.url}  service={t.service}" for t in targets)
    if only is None:
        lines.extend(f"warning: {w}" for w in plan.warnings)
    return "\n".join(lines) + "\n"


def _launcher_line(plan: Plan) -> str:
    """How the instances start on Slurm (each instance's way, when it is not the job's,
    is on its own line: ``[own srun step: container]``)."""
    if plan.slurm_launcher != "agents":
        return (
            f"Launcher (Slurm): {plan.slurm_launcher} - every instance is an srun step of its own"
        )
    instances = plan.instances()
    own = sum(1 for i in instances if i.via == "step")
    line = (
        "Launcher (Slurm): agents - one srt agent per node starts"
        f" {len(instances) - own} instance(s)"
    )
    if own:
        line += f"; {own} need an srun step of their own (marked below)"
    return line


def _overview_lines(plan: Plan) -> Iterator[str]:
    """The nodes, the discovery environment and the start order of the whole job."""
    yield "Nodes:"
    width = max((len(n.name) for n in plan.nodes), default=4)
    for n in plan.nodes:
        yield f"  {n.name.ljust(width)}  {n.ip}  {', '.join(n.roles)}"
    if plan.discovery_env:
        yield "Discovery:"
        for key in sorted(plan.discovery_env):
            yield f"  {key}={plan.discovery_env[key]}"
    yield "Start order:"
    for phase in PHASE_ORDER:
        names = plan.phases.get(phase, [])
        yield f"  {PHASE_TITLES[phase]}: {', '.join(names) if names else '-'}"
