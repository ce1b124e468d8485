"""A worker process launched ONCE across its nodes (an MPI worker wider than a node).

An engine says so with ``EngineProcess.spans_nodes``: the plan then holds one instance for
the worker, carrying every node (``PlannedInstance.nodes``, leader first) and its tasks per
node; the Slurm launcher starts it as one srun step over those nodes (never through a node
agent); the local launcher, whose nodes are virtual nodes of one machine, refuses it when
the plan is made. Its ports are its leader rank's, claimed on its first node only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from srt_services.contracts.context import InstanceContext
from srt_services.contracts.engine import Engine, EngineProcess, WorkerProcess
from srt_services.contracts.plan import Plan
from srt_services.hookspecs import hookimpl
from srt_services.launch.slurm.commands import srun_argv
from srt_services.recipe.models import Recipe
from srt_services.recipe.problems import RecipeError
from srt_services.testing import kit


class WideEngine(Engine):
    """A stand-in for an MPI engine (the real ones need GPUs): one launch per worker,
    a rank per GPU, listening on one port."""

    name: ClassVar[str] = "wide"
    backends: ClassVar[frozenset[str]] = frozenset({"trtllm"})
    runs_frontend: ClassVar[bool] = False

    def worker(
        self,
        recipe: Recipe,
        options: Any,
        process: WorkerProcess,
        processes: Sequence[WorkerProcess],
        ctx: InstanceContext,
    ) -> EngineProcess:
        wide = len(process.worker.nodes) > 1
        return EngineProcess(
            argv=["mpi-prog", str(process.process_index)],
            ports=(9100 + process.process_index,),
            srun_options={"mpi": "pmix"},
            spans_nodes=wide,
            tasks_per_node=len(process.worker.gpus) if wide else 1,
        )


class WidePlugin:
    @hookimpl
    def srt_register_engines(self) -> list[type[Engine]]:
        return [WideEngine]


def _plugins() -> Any:
    return kit.isolated_plugins(WidePlugin(), "wide")


def _recipe(gpus: int = 8, launcher: str | None = None) -> dict[str, Any]:
    return {
        "schema": 2,
        "name": "wide",
        "observability": {"metrics": False},
        "slurm": {"launcher": launcher} if launcher else {},
        "resources": {"gpus_per_node": 4},
        "engine": {"type": "trtllm", "model": "/m"},
        "frontend": {"type": "wide"},
        "roles": {"agg": {"workers": 2, "gpus_per_worker": gpus}},
    }


def test_a_worker_launched_across_its_nodes_is_one_instance_carrying_them() -> None:
    plan = kit.plan(_plugins(), _recipe())
    unit = plan.unit("agg")
    assert [(i.node, i.nodes, i.tasks_per_node) for i in unit.instances] == [
        ("node0", ["node0", "node1"], 4),
        ("node2", ["node2", "node3"], 4),
    ]
    assert unit.nodes == ["node0", "node1", "node2", "node3"]
    # the engine still sees one process per node (its port formulas count them all), and
    # is asked only for the leader's: the second worker's leader is process 2
    assert unit.instances[1].argv == ["mpi-prog", "2"]
    # ports: the leader rank's, claimed on the first node only
    assert [(p["node"], p["port"]) for p in plan.ports if p["port"] >= 9100] == [
        ("node0", 9100),
        ("node2", 9102),
    ]
    assert unit.instances[0].ports == [9100]


def test_a_worker_on_one_node_is_unchanged() -> None:
    plan = kit.plan(_plugins(), _recipe(gpus=4))
    assert [(i.node, i.nodes, i.tasks_per_node) for i in plan.unit("agg").instances] == [
        ("node0", [], None),
        ("node1", [], None),
    ]


def test_the_plan_json_round_trips_the_nodes() -> None:
    plan = kit.plan(_plugins(), _recipe())
    again = Plan.from_json(plan.to_json())
    assert again == plan
    inst = again.unit("agg").instances[0]
    assert (inst.nodes, inst.tasks_per_node) == (["node0", "node1"], 4)


def test_it_is_its_own_srun_step_even_under_the_agents() -> None:
    plan = kit.plan(_plugins(), _recipe(launcher="agents"))
    assert plan.slurm_launcher == "agents"
    assert {i.via for i in plan.unit("agg").instances} == {"step"}


def test_the_srun_line_is_one_step_over_the_workers_nodes() -> None:
    """srtctl's shape: `--nodes K --ntasks <gpus> --nodelist a,b` with the engine's options."""
    inst = kit.plan(_plugins(), _recipe()).unit("agg").instances[0]
    argv = srun_argv(inst, "42", "/j/logs/agg_0.out", "/j")
    assert argv[:8] == [
        "srun",
        "--jobid=42",
        "--overlap",
        "--nodes=2",
        "--ntasks=8",
        "--ntasks-per-node=4",
        "--nodelist=node0,node1",
        f"--job-name={inst.step}",
    ]
    assert "--mpi=pmix" in argv
    assert argv[-2:] == ["mpi-prog", "0"]
    one = kit.plan(_plugins(), _recipe(gpus=4)).unit("agg").instances[0]
    assert srun_argv(one, "42", "/j/l", "/j")[3:6] == [
        "--nodes=1",
        "--ntasks=1",
        "--nodelist=node0",
    ]


def test_the_local_launcher_refuses_it_when_the_plan_is_made() -> None:
    with pytest.raises(RecipeError) as caught:
        kit.plan(_plugins(), _recipe(), runs_here=True, job_dir="/tmp/wide-job")
    (p,) = caught.value.errors
    assert p.label == "roles.agg.gpus_per_worker"
    assert p.line is not None  # the recipe's own line:col
    assert "each agg worker is one launch across 2 nodes" in p.message
    assert "the local launcher cannot start" in p.message


def test_dry_run_shows_the_step_and_its_srun_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump(_recipe()))
    out = kit.run_cli(["dry-run", str(recipe)], plugins=_plugins())
    assert out.code == 0, out.stderr
    assert "agg_0_node0 on node0 (<node0-ip>) and node1: one launch of 4 task(s) per node" in (
        out.stdout
    )
    srun = kit.run_cli(["dry-run", str(recipe), "--srun"], plugins=_plugins()).stdout
    line = next(x for x in srun.splitlines() if x.startswith("  agg_0_node0: srun "))
    assert "--nodes=2 --ntasks=8 --ntasks-per-node=4 --nodelist=node0,node1" in line


def test_the_allocation_holds_the_ranks_of_the_widest_step() -> None:
    """`srt apply` asks for as many tasks per node as one step starts there, or srun
    refuses the step on a cluster that allocates CPUs ("More processors requested")."""
    from srt_services.app.apply import tasks_per_node
    from srt_services.launch.slurm.sbatch import ScriptInputs, render_script
    from srt_services.recipe.models import SlurmSpec
    from srt_services.site_config import SlurmDefaults

    assert tasks_per_node(kit.plan(_plugins(), _recipe())) == 4
    assert tasks_per_node(kit.plan(_plugins(), _recipe(gpus=2))) == 1
    script = render_script(
        ScriptInputs("j", 4, "/j", "/j/r.yaml", SlurmSpec(), SlurmDefaults(), tasks_per_node=4)
    )
    assert "#SBATCH --ntasks-per-node=4" in script.splitlines()
