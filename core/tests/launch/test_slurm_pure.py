"""The Slurm launcher's pure parts: address parsing, sbatch rendering, stop budgets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from srt_services.launch.slurm.batchhost import pick_ipv4
from srt_services.launch.slurm.sbatch import ScriptInputs, render_script
from srt_services.recipe.models import SlurmSpec
from srt_services.site_config import SlurmDefaults


def test_addresses_survive_srun_chatter() -> None:
    # what a node may print, srun's own lines included when stderr ends up merged
    noisy = "srun: Step created for StepId=12.3\nsrun: job 12 queued\n127.0.0.1 10.0.0.7 fe80::1\n"
    assert pick_ipv4(noisy) == "10.0.0.7"
    assert pick_ipv4("inet 192.168.3.4/24 brd 192.168.3.255 scope global ib0") == "192.168.3.4"
    assert pick_ipv4("srun: error: task 0: Exited with exit code 1") is None
    assert pick_ipv4("999.1.1.1 10.1.2.3") == "10.1.2.3"


def test_sbatch_script_takes_recipe_values_over_site_defaults() -> None:
    script = render_script(
        ScriptInputs(
            job_name="j",
            nodes=3,
            job_dir="/jobs/j",
            recipe="/jobs/j/recipe.yaml",
            spec=SlurmSpec(partition="fast", signal_before_end_seconds=0, no_kill=False),
            site=SlurmDefaults(partition="slow", account="acct", sbatch_extra=("--exclusive",)),
            python="/venv/bin/python",
            recipe_dir="/home/me/recipes",
        )
    )
    lines = script.splitlines()
    assert "#SBATCH --partition=fast" in lines
    assert "#SBATCH --account=acct" in lines
    assert "#SBATCH --exclusive" in lines
    assert not any("--signal" in line or "--no-kill" in line for line in lines)
    assert "export SRT_RECIPE_DIR=/home/me/recipes" in lines
    assert lines[-1] == (
        "exec /venv/bin/python -m srt_services run /jobs/j/recipe.yaml --job-dir /jobs/j"
        " --launcher slurm --plain"
    )


def test_a_plan_with_agents_makes_the_script_start_them_with_the_allocation() -> None:
    from srt_services.launch.slurm.agents_step import EARLY_VAR

    def script(agents: bool) -> list[str]:
        inputs = ScriptInputs(
            "j", 2, "/j", "/j/r.yaml", SlurmSpec(), SlurmDefaults(), agents=agents
        )
        return render_script(inputs).splitlines()

    exported = [line for line in script(True) if EARLY_VAR in line]
    assert len(exported) == 1 and exported[0].startswith(f"export {EARLY_VAR}=1")
    assert not any(EARLY_VAR in line for line in script(False))
    # the agents' step is started first, then the same orchestrator is exec'd
    first, _, orchestrator = script(True)[-1].partition(" -- ")
    assert first.split()[:4] == ["exec", sys.executable, "-m", "srt_services.launch.slurm.first"]
    assert "--job-dir /j" in first
    assert orchestrator == script(False)[-1].removeprefix("exec ")


def test_the_cleanup_removes_only_the_jobs_own_node_local_tree() -> None:
    from srt_services.contracts.context import JobPaths
    from srt_services.launch.slurm.launcher import own_tree

    planned = JobPaths("/shared/jobs/run1", "4711", "/tmp").local_job_dir
    assert planned == "/tmp/srt-4711", "a Slurm job's tree is named by its job id"
    assert own_tree(planned, "4711")
    assert own_tree("/scratch/srt-4711", "4711")
    for other in ("/tmp/srt-47110", "/tmp/srt-4711-abc", "/tmp", "/tmp/srt-4711/x", "srt-4711"):
        assert not own_tree(other, "4711"), other


@pytest.mark.parametrize("name", ["at-100%j", "back\\slash", 'dq"x', "new\nline"])
def test_a_job_directory_slurm_cannot_carry_is_refused_before_anything_is_written(
    tmp_path: Path, name: str
) -> None:
    from srt_services.app.apply import stage
    from srt_services.launch.slurm.allocation import SlurmError
    from srt_services.testing import kit

    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: r\nobservability: {metrics: false}\nservices: [{name: s, command: [x]}]\n"
    )
    with pytest.raises(SlurmError, match="choose a job directory without"):
        stage(kit.setup(), str(recipe), str(tmp_path / name), pin=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.yaml"]


def test_sbatch_directives_quote_a_path_with_blanks() -> None:
    script = render_script(
        ScriptInputs(
            job_name="j",
            nodes=1,
            job_dir="/jobs/my job's dir",
            recipe="/jobs/my job's dir/recipe.yaml",
            spec=SlurmSpec(),
            site=SlurmDefaults(),
            python="/venv/bin/python",
        )
    )
    lines = script.splitlines()
    assert '#SBATCH --output="/jobs/my job\'s dir/logs/sbatch.out"' in lines
    assert '#SBATCH --chdir="/jobs/my job\'s dir"' in lines


def test_the_batch_scripts_first_program_never_keeps_the_orchestrator_from_starting(
    tmp_path: Path,
) -> None:
    """Where it cannot start the agents (here: no allocation), it says so and execs the
    orchestrator anyway, which then starts them itself."""
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
    probe = "import os; print(os.getpid(), os.environ.get('SRT_AGENTS_LISTEN_FD'))"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:]);"
            " print(p.pid); sys.exit(p.wait())",
            sys.executable,
            "-m",
            "srt_services.launch.slurm.first",
            "--job-dir",
            str(tmp_path),
            "--",
            sys.executable,
            "-c",
            probe,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=60,
    )
    # the two lines may come in either order (the parent's is flushed at its exit, the
    # exec'd child may print first): the parent's has one word, the child's two
    lines = [line.split() for line in done.stdout.splitlines() if line.strip()]
    (first_pid,) = next(w for w in lines if len(w) == 1)
    exec_pid, fd = next(w for w in lines if len(w) == 2)
    assert exec_pid == first_pid and fd == "None", "the same process, exec'd, nothing handed down"
    assert "the agents start with the orchestrator instead" in done.stderr
