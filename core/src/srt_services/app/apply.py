"""``srt apply`` / ``srt render``: stage the recipe into a job directory, pin its sources,
write the sbatch script, and (apply) submit it.

The sbatch script runs ``srt run --launcher slurm`` on the staged recipe inside the
allocation; that run plans again, against the real nodes, so what is staged here is the
recipe (with its sources pinned) and the script, not a plan."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

from srt_services.app import compose
from srt_services.jobdir.layout import SCRIPT, JobDir, default_job_dir
from srt_services.jobdir.result import SubmittedJob, write_submitted
from srt_services.launch.slurm.allocation import SlurmError, run
from srt_services.launch.slurm.sbatch import (
    ScriptInputs,
    render_script,
    slurm_path_problem,
    write_script,
)
from srt_services.recipe.pinning import Pin, pin_sources
from srt_services.recipe.problems import Problem, RecipeError, locate
from srt_services.recipe.source import Document

if TYPE_CHECKING:
    from srt_services.app.compose import Setup
    from srt_services.checking.load import LoadedRecipe
    from srt_services.contracts.plan import Plan


@dataclass(slots=True)
class Submission:
    job_dir: str
    script: str
    recipe: str
    nodes: int
    job_id: str | None = None
    pins: list[Pin] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "job_dir": self.job_dir,
            "script": self.script,
            "recipe": self.recipe,
            "nodes": self.nodes,
            "pinned_sources": [p.as_dict() for p in self.pins],
        }


@dataclass(frozen=True, slots=True)
class ApplyRequest:
    recipe: str
    #: the job directory to create (default: a new one under the job root)
    out_dir: str | None = None
    #: pin every source rev to a commit (``git ls-remote``); ``srt render`` does not
    pin: bool = True
    #: submit the rendered script (``srt apply``; not ``--dry-run`` or ``srt render``)
    submit: bool = True
    #: another tool's sweep file: the variants to submit, one job each (default: the
    #: tool's default set)
    variant: str | None = None


def apply(where: Setup, request: ApplyRequest) -> list[Submission]:
    """Stage, pin, render and (when asked) submit each job of the recipe file (one for a
    schema-2 recipe; one per selected variant of a sweep file, each in its own job
    directory, under ``out_dir`` when given); a rev that cannot be pinned, or any invalid
    variant, is refused before anything is written."""
    jobs = compose.load_all(where, request.recipe, request.variant)
    out_dirs: list[str | None] = [request.out_dir]
    if len(jobs) > 1:
        base = request.out_dir
        out_dirs = [os.path.join(base, loaded.recipe.name) if base else None for loaded in jobs]
    subs = [
        stage(where, request.recipe, out_dir, request.pin, loaded)
        for loaded, out_dir in zip(jobs, out_dirs, strict=True)
    ]
    if request.submit:
        for sub in subs:
            submit(sub)
    return subs


def stage(
    where: Setup,
    recipe_path: str,
    out_dir: str | None,
    pin: bool,
    loaded: LoadedRecipe | None = None,
) -> Submission:
    """Stage one job (``loaded``: one variant already loaded from ``recipe_path``)."""
    from srt_services.contracts.allocation import AllocationRequest

    planned = compose.plan(where, loaded or recipe_path, AllocationRequest("symbolic"))
    loaded, plan, site = planned.loaded, planned.plan, where.site
    job = JobDir(os.path.abspath(out_dir or default_job_dir(loaded.recipe.name)))
    problem = slurm_path_problem(job.path)
    if problem is not None:
        raise SlurmError(problem)
    if os.path.exists(job.state_file) or os.path.exists(job.submission_file):
        raise SlurmError(f"{job.path} already holds a job; choose another -o directory")
    data = loaded.document.data
    pins = pin_sources(data) if pin else []
    _refuse_unpinned(loaded.document, [p for p in pins if p.error])
    job.create()
    staged = job.file("recipe.yaml")
    with open(staged, "w", encoding="utf-8") as fh:
        fh.write("# Staged by srt: the recipe as submitted, with source revs pinned to commits.\n")
        yaml.safe_dump(data, fh, sort_keys=False, default_flow_style=False)
    script = render_script(
        ScriptInputs(
            job_name=loaded.recipe.name,
            nodes=len(plan.nodes),
            job_dir=job.path,
            recipe=staged,
            spec=loaded.recipe.slurm,
            site=site.slurm,
            site_config=site.path,
            recipe_dir=compose.recipe_dir(recipe_path),
            tasks_per_node=tasks_per_node(plan),
            agents=any(i.via == "agent" for i in plan.instances()),
        )
    )
    script_path = job.file(SCRIPT)
    write_script(script_path, script)
    return Submission(
        job_dir=job.path, script=script_path, recipe=staged, nodes=len(plan.nodes), pins=pins
    )


def tasks_per_node(plan: Plan) -> int:
    """The most tasks one of the plan's steps starts on a node: an instance across nodes
    says so (``tasks_per_node``), an instance on one node by its ``ntasks`` srun option."""
    most = 1
    for inst in plan.instances():
        count = inst.tasks_per_node or 1
        ntasks = inst.srun_options.get("ntasks", "1")
        if not inst.nodes and ntasks.isdigit():
            count = int(ntasks)
        most = max(most, count)
    return most


def _refuse_unpinned(doc: Document, failed: list[Pin]) -> None:
    """A rev that names a branch, or that the remote does not know, is refused before the
    job directory exists: the job would otherwise wait in the queue only to build a moving
    target or fail at its first clone."""
    if not failed:
        return
    problems = [
        Problem(p.at, f"cannot be pinned to a commit: {p.error}") for p in failed if p.error
    ]
    raise RecipeError(doc.source, locate(problems, doc.source, doc.data, doc.mark_of))


def submit(sub: Submission) -> str:
    out = run(["sbatch", "--parsable", sub.script], timeout=60.0).strip()
    job_id = out.split(";")[0].strip()
    if not job_id.isdigit():
        raise SlurmError(f"sbatch answered {out!r}, not a job id")
    sub.job_id = job_id
    write_submitted(
        JobDir(sub.job_dir), SubmittedJob(job_id, time.time(), sub.script, nodes=sub.nodes)
    )
    return job_id
