"""One launch across several nodes (an MPI worker wider than a node) on a real Slurm.

The srun line srt builds for such an instance (``srun_argv`` of a ``PlannedInstance`` with
``nodes``) is run inside a 2-node allocation of the 3-node netns cluster: one step, its
tasks spread evenly over exactly the instance's nodes, each told its rank; then stopped as
the Slurm launcher stops a step (``scancel --signal=TERM <job>.<step>``), after which no
task is left on any of the nodes. The program is a stand-in for an MPI engine (those need
GPUs); ``--mpi=pmix`` is passed only when the cluster's srun can load it (Debian's test
cluster lists the plugin but lacks the PMIx library).
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from srt_services.contracts.plan import PlannedInstance
from srt_services.launch.slurm.commands import srun_argv

pytestmark = pytest.mark.slurm


def _holders(marker: str) -> list[int]:
    """Live processes running the stand-in (the netns nodes share this machine's PIDs)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmd:
            found.append(int(entry))
    return found


def test_an_instance_across_two_nodes_is_one_step_with_ranks_on_each(
    shell: Any, tmp_path: Path, wait_until: Any
) -> None:
    tmp_path.chmod(0o755)
    job = shell.run(
        # the allocation srt apply asks for a plan whose widest step starts 2 tasks a node
        "sbatch",
        "--parsable",
        "--nodes=2",
        "--ntasks-per-node=2",
        f"--output={tmp_path}/holder.out",
        "--job-name=span-holder",
        "--wrap",
        "sleep 120",
    ).stdout.strip()
    try:
        wait_until(lambda: shell.job_state(job) == "RUNNING", 30, what="holder job running")
        listed = shell.run("squeue", "-h", "-j", job, "-o", "%N").stdout.strip()
        nodes = shell.run("scontrol", "show", "hostnames", listed).stdout.split()
        assert len(nodes) == 2
        # Debian's Slurm lists pmix but may lack the PMIx library: try it, as srun would
        probe = ["srun", f"--jobid={job}", "--overlap", "-N1", "-n1", "--mpi=pmix", "true"]
        pmix = shell.run(*probe, check=False).returncode == 0
        options = {"mpi": "pmix"} if pmix else {}
        marker = f"mpi-standin-{uuid.uuid4().hex[:8]}.sh"
        script = tmp_path / marker
        out = tmp_path / "ranks"
        script.write_text(
            "#!/bin/bash\n"
            f'echo "$(hostname) $SLURM_PROCID $SLURM_NTASKS $SLURM_STEP_NUM_NODES" >> {out}\n'
            "while true; do sleep 0.2; done\n"
        )
        script.chmod(0o755)
        inst = PlannedInstance(
            step="decode_0_span",
            unit="decode",
            node=nodes[0],
            node_ip="",
            index=0,
            argv=["bash", str(script)],
            env={},
            log="logs/decode_0_span.out",
            work_dir=str(tmp_path),
            srun_options=options,
            nodes=nodes,
            tasks_per_node=2,
        )
        argv = srun_argv(inst, job, str(tmp_path / "span.out"), str(tmp_path))
        client = subprocess.Popen(argv, env=shell.env, stdout=subprocess.DEVNULL)
        try:

            def ranks() -> list[list[str]] | None:
                lines = out.read_text().splitlines() if out.exists() else []
                return [line.split() for line in lines] if len(lines) >= 4 else None

            got = wait_until(ranks, 30, what="every rank started")
            assert sorted(int(r[1]) for r in got) == [0, 1, 2, 3]
            assert {r[2] for r in got} == {"4"} and {r[3] for r in got} == {"2"}
            per_node = sorted(r[0] for r in got)
            assert per_node == sorted([*nodes, *nodes]), "two ranks on each of its nodes"
            steps = shell.steps(job)
            (step_id,) = [s for s, (name, _) in steps.items() if name == inst.step]
            assert shell.run("scontrol", "show", "hostnames", steps[step_id][1]).stdout.split() == (
                nodes
            )
            # stopped as the Slurm launcher stops a step: TERM to the step, srun waits
            shell.run("scancel", "--signal=TERM", step_id)
            client.wait(timeout=30)  # srun ends with its step
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
        deadline = time.monotonic() + 15
        while _holders(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _holders(marker), "a rank of the step survived it on some node"
        assert inst.step not in {name for name, _ in shell.steps(job).values()}
    finally:
        shell.run("scancel", job, check=False)
        wait_until(lambda: not shell.job_pids(job), 30, what="holder job gone")
