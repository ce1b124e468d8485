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
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing import needs

if os.environ.get("SRT_REQUIRE_RAY") != "1":
    pytest.importorskip("srt_ray")

pytestmark = [pytest.mark.slurm, pytest.mark.component, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLIENT = str(REPO / "plugins" / "ray" / "tests" / "ray_client.py")
#: sbatch to a formed cluster of two netns nodes took 15-17 s on an idle machine.
RAY_UP = 300.0


@pytest.fixture(autouse=True)
def _ray_installed() -> None:
    if needs.venv_script("ray") is None:
        needs.missing("needs Ray (pip install 'srt-ray[ray]')", "SRT_REQUIRE_RAY")


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
    submit: Callable[..., Any], shell: Any, slurm_cluster_3: Any
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
    assert job.plan()["discovery_env"] == {
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
    assert not _mentioning(job.node_local() + "/"), "a process still uses the job's temp dirs"


def test_a_member_that_never_joins_fails_the_gate_naming_its_node(
    submit: Callable[..., Any], shell: Any, slurm_cluster_3: Any
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
    submit: Callable[..., Any], shell: Any
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
