"""``srt dry-run``: exactly what ``srt run`` (or the sbatch script) would do, started never."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.app import compose

if TYPE_CHECKING:
    from srt_services.app.compose import Planned, Setup
    from srt_services.contracts.plan import Plan


@dataclass(frozen=True, slots=True)
class DryRunRequest:
    #: a recipe file, or ``-`` for standard input
    recipe: str
    #: symbolic nodes (``--nodes``), or these node names (``--nodelist``)
    nodes: int | None = None
    nodelist: tuple[str, ...] | None = None
    #: the addresses ``srt run`` would use (127.0.0.x) and its warnings
    local: bool = False
    #: also the srun line of every instance, as the Slurm launcher would start it
    srun_lines: bool = False
    #: another tool's sweep file: the variants to plan (default: the tool's default set)
    variant: str | None = None


@dataclass(frozen=True, slots=True)
class SrunLine:
    step: str
    unit: str
    argv: list[str]
    #: what starts it instead of an srun of its own (its node's agent)
    via: str | None = None


@dataclass(frozen=True, slots=True)
class DryRun:
    #: the plan of the job, or of the first of several (``variants`` holds them all)
    planned: Planned
    #: the site's image aliases (``alias -> image``), for showing what a unit runs in
    container_aliases: dict[str, str] = field(default_factory=dict)
    #: the srun line of every instance, when asked for
    srun: list[SrunLine] = field(default_factory=list)
    #: every variant planned, when the recipe file holds several jobs
    variants: list[Planned] = field(default_factory=list)


def dry_run(where: Setup, request: DryRunRequest) -> DryRun:
    from srt_services.contracts.allocation import AllocationRequest

    nodes = AllocationRequest(
        kind="local" if request.local else "symbolic",
        count=request.nodes,
        nodelist=request.nodelist,
    )
    # a local dry run warns as `srt run` will about what the local launcher does not apply
    launcher = where.plugins.launcher_class("local") if request.local else None
    with compose.collector_paused():
        jobs = compose.load_all(where, request.recipe, request.variant)
        plans = [compose.plan(where, loaded, nodes, launcher=launcher) for loaded in jobs]
    planned = plans[0]
    srun: list[SrunLine] = []
    if request.srun_lines:
        from srt_services.launch.slurm.agents_step import AGENTS_STEP
        from srt_services.launch.slurm.commands import srun_argv

        plan = planned.plan
        site = where.site
        agents = [i for i in plan.instances() if i.via == "agent"]
        if agents:
            srun.append(SrunLine(AGENTS_STEP, "", _agents_argv(where, plan)))
        for inst in plan.instances():
            if inst.via == "agent":
                # no srun of its own: the agent on its node starts it
                srun.append(SrunLine(inst.step, inst.unit, [], via=f"the srt agent on {inst.node}"))
                continue
            argv = srun_argv(
                inst,
                "<job_id>",
                f"{plan.job_dir}/{inst.log}",
                plan.job_dir,
                site.container_aliases,
                site.container_mounts,
                site.slurm.srun_extra,
            )
            srun.append(SrunLine(inst.step, inst.unit, argv))
    several = plans if len(plans) > 1 else []
    return DryRun(planned, dict(where.site.container_aliases), srun, several)


def _agents_argv(where: Setup, plan: Plan) -> list[str]:
    """The agents' step as the Slurm launcher starts it (addresses as placeholders)."""
    import sys

    from srt_services.launch.slurm.agents_step import FleetConfig, agents_argv

    cfg = FleetConfig(
        job_id="<job_id>",
        job_name=plan.job_name,
        job_dir=plan.job_dir,
        cookie="",
        nodes=[n.name for n in plan.nodes],
        advertise="<batch-host-ip>",
        bind="",
        local_dir=plan.local_dir,
        start_timeout=where.site.slurm.agent_start_timeout,
        lost_after=0.0,
        srun_extra=where.site.slurm.srun_extra,
        python=sys.executable,
        interface=where.site.slurm.network_interface,
    )
    # as a submitted job starts them: with the allocation, each saying its node's address
    return agents_argv(cfg, 0, f"{plan.job_dir}/.srt-agents.key", early=True)
