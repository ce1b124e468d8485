"""srt-ray on the 3-node Slurm cluster: a Ray cluster over a pool of two nodes, each a
network namespace with its own address (Ray keeps a netns node's address; on one machine
it would replace a loopback one by the machine's own, so clusters are tested only here).

Needs Ray (``pip install 'srt-ray[ray]'``): skipped without srt-ray, an error with
``SRT_REQUIRE_RAY=1`` (the ``ray`` tox environment). Every test ends by proving nothing
of the job survived: no process carrying its SLURM_JOB_ID or its srt cookie, Ray's ~20
processes per node included.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from srt_services.jobdir.events import read_events
from srt_services.testing.survivors import survivors

if os.environ.get("SRT_REQUIRE_RAY") != "1":
    pytest.importorskip("srt_ray")

pytestmark = [pytest.mark.slurm, pytest.mark.component, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLIENT = str(REPO / "plugins" / "ray" / "tests" / "ray_client.py")
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}
#: sbatch to a formed cluster of two netns nodes took 15-17 s on an idle machine.
RAY_UP = 300.0


def ray_binary() -> str | None:
    return shutil.which("ray") or (
        str(Path(sys.executable).parent / "ray")
        if (Path(sys.executable).parent / "ray").exists()
        else None
    )


@pytest.fixture(autouse=True)
def _ray_installed() -> None:
    if ray_binary() is None:
        if os.environ.get("SRT_REQUIRE_RAY") == "1":
            pytest.fail("Ray is required (SRT_REQUIRE_RAY=1) but `ray` is not installed")
        pytest.skip("needs Ray (pip install 'srt-ray[ray]')")


class RayJob:
    """One ``srt apply`` of a Ray recipe and what it left."""

    def __init__(self, shell: Any, job_id: str, job_dir: Path) -> None:
        self.shell = shell
        self.job_id = job_id
        self.job_dir = job_dir

    def events(self, name: str, **match: Any) -> list[dict[str, Any]]:
        evs = read_events(str(self.job_dir / "events.jsonl"))
        return [
            e for e in evs if e["event"] == name and all(e.get(k) == v for k, v in match.items())
        ]

    def sbatch_log(self) -> str:
        try:
            return (self.job_dir / "logs" / "sbatch.out").read_text()
        except OSError:
            return "(no sbatch.out)"

    def wait_event(self, name: str, timeout: float, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.events(name, **match)
            if found:
                return found[0]
            if self.shell.job_state(self.job_id) in DONE:
                break
            time.sleep(0.1)
        raise AssertionError(f"no {name} {match} event; sbatch.out:\n{self.sbatch_log()}")

    def wait_done(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while (state := self.shell.job_state(self.job_id)) not in DONE:
            assert time.monotonic() < deadline, f"still {state}:\n{self.sbatch_log()}"
            time.sleep(0.3)
        return str(state)

    def result(self) -> dict[str, Any]:
        return json.loads((self.job_dir / "result.json").read_text())

    def log(self, step: str) -> str:
        return (self.job_dir / "logs" / f"{step}.out").read_text()


@pytest.fixture
def shell(slurm_cluster_3: Any, slurm_env: Any) -> Any:
    return slurm_env(slurm_cluster_3)


@pytest.fixture
def submit(
    slurm_cluster_3: Any, shell: Any, tmp_path: Path, wait_until: Any
) -> Iterator[Callable[[str, str], RayJob]]:
    submitted: list[RayJob] = []

    def _submit(text: str, name: str) -> RayJob:
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(textwrap.dedent(text))
        job_dir = tmp_path / name
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "srt_services",
                "apply",
                str(recipe),
                "-o",
                str(job_dir),
                "--json",
            ],
            capture_output=True,
            text=True,
            env=slurm_cluster_3.env(),
            check=False,
        )
        assert out.returncode == 0, out.stderr
        job = RayJob(shell, json.loads(out.stdout)["job_id"], job_dir)
        submitted.append(job)
        return job

    yield _submit
    for job in submitted:
        job_id = job.job_id
        if shell.job_state(job_id) not in DONE:
            shell.run("scancel", job_id, check=False)
        wait_until(
            lambda job_id=job_id: not shell.job_pids(job_id), timeout=60, what="job processes gone"
        )
        assert not survivors(str(job.job_dir))
        # the nodes' {local_dir} trees (Ray's temp dirs) are on this machine's /tmp
        shutil.rmtree(f"/tmp/srt-{job.job_id}", ignore_errors=True)


def recipe(name: str, bench: list[str], **entry: Any) -> str:
    service = {
        "name": "train",
        "type": "ray",
        "nodes": 2,
        "options": {"num_cpus": 1, "num_gpus": 0},
        **entry,
    }
    return (
        "schema: 2\nobservability: {metrics: false}\n"
        f"name: {name}\n"
        "slurm: {signal_before_end_seconds: 0}\n"
        "frontend: {type: none}\n"
        "resources: {gpus_per_node: 1}\n"
        f"services:\n  - {json.dumps(service)}\n"
        f"benchmark: {{type: command, command: {json.dumps(bench)}}}\n"
    )


def test_a_pool_of_two_forms_one_cluster_the_benchmark_submits_to_and_nothing_survives(
    submit: Callable[[str, str], RayJob], shell: Any, slurm_cluster_3: Any
) -> None:
    job = submit(recipe("raypool", [sys.executable, CLIENT, "2"]), "raypool")
    job.wait_event("fleet_ready", RAY_UP, unit="train")
    ray_pids = {p: _cmdline(p) for p in shell.job_pids(job.job_id)}
    assert job.wait_done(RAY_UP) == "COMPLETED", job.sbatch_log()
    result = job.result()
    assert result["exit_code"] == 0, (result, job.sbatch_log())
    ips = slurm_cluster_3.node_ips
    launched = {e["step"]: e["node"] for e in job.events("launched")}
    head, member = launched["service_train_n1"], launched["service_train_n2"]
    assert (head, member) == ("n1", "n2")
    plan = json.loads((job.job_dir / "plan.json").read_text())
    assert plan["discovery_env"] == {
        "RAY_ADDRESS": f"{ips['n1']}:6379",
        "RAY_API_SERVER_ADDRESS": f"http://{ips['n1']}:8265",
    }
    bench = job.log("benchmark")
    # the submitted job's driver saw both nodes, each under its node's own address
    assert "RAY_NODES 2" in bench, bench
    line = next(x for x in bench.splitlines() if x.startswith("NODE_IPS "))
    assert json.loads(line.split(" ", 1)[1]) == sorted([ips["n1"], ips["n2"]])
    # the gate held the benchmark until the member was ALIVE in the head's list
    fleet = job.events("fleet_ready", unit="train")[0]
    bench_start = job.events("launched", unit="benchmark")[0]
    member_ready = job.events("ready", step="service_train_n2")[0]
    assert member_ready["t"] <= fleet["t"] <= bench_start["t"]
    # Ray's processes on both nodes belonged to the job, and all of them are gone
    assert sum(c.endswith("raylet") or "/raylet " in c for c in ray_pids.values()) == 2, ray_pids
    assert sum("gcs_server" in c for c in ray_pids.values()) == 1, ray_pids
    for pid, cmd in ray_pids.items():
        assert not shell.alive(pid), f"pid {pid} ({cmd}) survived the job"
    assert not _mentioning(f"/tmp/srt-{job.job_id}/"), "a process still uses the job's temp dirs"


def test_a_member_that_never_joins_fails_the_gate_naming_its_node(
    submit: Callable[[str, str], RayJob], shell: Any, slurm_cluster_3: Any
) -> None:
    # n2 prints what a member prints once started, then never starts Ray
    fake = 'if [ "{index}" != 0 ]; then echo "Ray runtime started (not really)"; exec sleep 600; fi'
    text = recipe(
        "raymissing",
        ["true"],
        preamble=fake,
        readiness={"log": {"pattern": "Ray runtime started"}, "timeout_seconds": 40},
    )
    job = submit(text, "raymissing")
    assert job.wait_done(RAY_UP) in {"FAILED", "COMPLETED"}, job.sbatch_log()
    cause = job.result()["cause"]
    assert (cause["kind"], cause["unit"]) == ("readiness_timeout", "train"), cause
    ips = slurm_cluster_3.node_ips
    assert f"1/2 Ray nodes ALIVE; missing: n2 ({ips['n2']})" in cause["message"], cause
    assert not job.events("launched", unit="benchmark")


def test_a_head_crash_fails_the_job_and_stops_the_member(
    submit: Callable[[str, str], RayJob], shell: Any
) -> None:
    job = submit(recipe("raycrash", ["sleep", "600"]), "raycrash")
    job.wait_event("fleet_ready", RAY_UP, unit="train")
    ray_pids = shell.job_pids(job.job_id)
    head = [p for p in ray_pids if " start --head " in f" {_cmdline(p)} "]
    assert len(head) == 1, [(_cmdline(p), p) for p in ray_pids]
    os.kill(head[0], signal.SIGKILL)
    assert job.wait_done(120) in {"FAILED", "COMPLETED"}, job.sbatch_log()
    result = job.result()
    assert result["exit_code"] != 0
    cause = result["cause"]
    assert (cause["kind"], cause["unit"], cause["step"]) == (
        "critical_service_exit",
        "train",
        "service_train_n1",
    ), cause
    # the member was stopped with it (srt's stop, not a leftover that dies on its own)
    member_exit = job.events("exited", step="service_train_n2")
    assert member_exit, job.sbatch_log()
    for pid in ray_pids:
        assert not shell.alive(pid), f"pid {pid} ({_cmdline(pid)}) survived"


def _cmdline(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()


def _mentioning(text: str) -> list[str]:
    """Command lines of live processes that contain ``text`` (Ray's name their temp dir)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and text in (cmd := _cmdline(int(entry))):
            found.append(f"{entry}: {cmd}")
    return found
