"""Real Ray under ``srt run`` on this machine: a head alone (Ray replaces a loopback node
address by the machine's own, so clusters of several nodes are tested on the 3-node
Slurm cluster, tests/slurm/test_ray_slurm.py).

Each test starts Ray once (~700 MB, 5-20 s here). Ports are ones the kernel just handed
out, Ray's fixed ones (client server 10001, dashboard agent 52365) included, so a parallel
session's Ray cannot collide with these. Every test ends with the no-survivors check, and
the tests that watch Ray run also check that each of its ~20 processes is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from srt_ray.fleet import RayFleetProbe
from srt_services.testing.jobs import JobRun, Jobs, events_of, free_port, wait_for
from srt_services.testing.survivors import survivors

HERE = Path(__file__).resolve().parent
CLIENT = str(HERE / "ray_client.py")
#: Ray on a busy two-core machine: the head alone has been seen to need 20 s.
RAY_UP = 240.0

pytestmark = [pytest.mark.component, pytest.mark.slow]


def recipe(
    bench: list[str],
    *,
    placement: dict[str, Any] | None = None,
    nodes: int | None = None,
    extra: dict[str, Any] | None = None,
) -> str:
    entry: dict[str, Any] = {
        "name": "ray",
        "type": "ray",
        "options": {
            "port": free_port(),
            "dashboard_port": free_port(),
            "num_cpus": 1,
            "num_gpus": 0,
        },
        "args": [
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
        ],
        **({"placement": placement} if placement else {}),
        **({"nodes": nodes} if nodes else {}),
        **(extra or {}),
    }
    return (
        "schema: 2\nobservability: {metrics: false}\n"
        "name: raylocal\n"
        "frontend: {type: none}\n"
        "resources: {gpus_per_node: 1}\n"
        "services:\n"
        f"  - {json.dumps(entry)}\n"
        f"benchmark: {{type: command, command: {json.dumps(bench)}}}\n"
    )


def start(jobs: Jobs, tmp_path: Path, text: str) -> JobRun:
    # a job id of its own: {local_dir} lives in /tmp/srt-<job id> on this machine, shared
    # with every other session's jobs
    return jobs.start(text, job_dir=str(tmp_path / f"ray-{secrets.token_hex(4)}"))


def job_pids(run: JobRun) -> set[int]:
    """Every live process of the job (by its cookie, cgroup and sessions)."""
    return {int(line.split()[1]) for line in survivors(run.job_dir)}


def local_addresses() -> set[str]:
    return {
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET
    }


def names(run: JobRun) -> list[str]:
    return [f"{e['event']}:{e.get('unit') or e.get('step') or ''}" for e in run.events()]


def test_a_head_alone_forms_passes_the_gate_and_runs_a_submitted_job(
    srt_jobs: Jobs, ray: str, tmp_path: Path
) -> None:
    run = start(
        srt_jobs, tmp_path, recipe([sys.executable, CLIENT, "1"], placement={"node": "head"})
    )
    run.wait_event("fleet_ready", timeout=RAY_UP, unit="ray")
    ray_pids = job_pids(run)
    run.wait(RAY_UP)
    assert run.code == 0, run.stdout + run.stderr + run.log("benchmark")
    order = names(run)
    # the head's own readiness, then the gate, then what submits work
    assert order.index("ready:ray") < order.index("fleet_waiting:ray")
    assert order.index("fleet_ready:ray") < order.index("launched:benchmark")
    bench = run.log("benchmark")
    assert "RAY_NODES 1" in bench, bench
    # Ray registered the node under the machine's own address (not the loopback srt
    # planned): an address of this machine, so nothing went elsewhere
    line = next(x for x in bench.splitlines() if x.startswith("NODE_IPS "))
    ips = json.loads(line.split(" ", 1)[1])
    assert len(ips) == 1 and set(ips) <= local_addresses(), ips
    # Ray's ~20 processes were the job's, and none of them outlived it; nor its temp dir
    assert len(ray_pids) >= 10, ray_pids
    assert not [p for p in ray_pids if psutil.pid_exists(p)]
    assert not Path(f"/tmp/srt-{os.path.basename(run.job_dir)}").exists()
    # a clean stop: every Ray process left on SIGTERM, none needed SIGKILL
    assert not events_of(run, "escalated") and not events_of(run, "sweep")


def test_srt_stop_leaves_no_ray_process_and_the_gate_reads_the_live_head(
    srt_jobs: Jobs, ray: str, tmp_path: Path
) -> None:
    run = start(srt_jobs, tmp_path, recipe(["sleep", "600"], placement={"node": "head"}))
    run.wait_event("fleet_ready", timeout=RAY_UP, unit="ray")
    plan = json.loads(Path(run.job_dir, "plan.json").read_text())
    fleet = next(u for u in plan["units"] if u["name"] == "ray")["fleet"]
    # the probe against Ray itself: one planned member more than there is
    config = dict(fleet["config"])
    config["members"] = [*config["members"], {"node": "ghost", "ip": "10.255.255.1"}]

    class Target:
        last_error = ""
        log_path = str(Path(run.job_dir, "logs", "service_ray.out"))
        log_offset = 0

    Target.config = config  # type: ignore[attr-defined]
    result = asyncio.run(RayFleetProbe().check(Target(), 5.0))  # type: ignore[arg-type]
    assert not result.ok
    assert result.detail.startswith(
        "1/2 Ray nodes ALIVE; missing: 1 of node0 (127.0.0.1), ghost (10.255.255.1); ALIVE at "
    ), result.detail
    ray_pids = job_pids(run)
    assert len(ray_pids) >= 10
    subprocess.run(
        [sys.executable, "-m", "srt_services", "stop", run.job_dir],
        check=True,
        capture_output=True,
        timeout=120,
    )
    run.wait(120)
    assert run.result()["cause"]["kind"] == "user_stop", run.result()  # srt stop: the user
    assert not [p for p in ray_pids if psutil.pid_exists(p)]
    assert not events_of(run, "escalated") and not events_of(run, "sweep")


def test_a_member_that_never_joins_fails_the_gate_naming_the_missing_node(
    srt_jobs: Jobs, ray: str, tmp_path: Path
) -> None:
    # node1's instance says what a member says once started, but never starts Ray
    fake = 'if [ "{index}" != 0 ]; then echo "Ray runtime started (not really)"; exec sleep 600; fi'
    text = recipe(
        [sys.executable, CLIENT, "2"],
        nodes=2,
        extra={
            "preamble": fake,
            "readiness": {"log": {"pattern": "Ray runtime started"}, "timeout_seconds": 40},
        },
    )
    run = start(srt_jobs, tmp_path, text)
    run.wait(RAY_UP)
    assert run.code == 1, run.stdout + run.stderr
    cause = run.result()["cause"]
    assert cause["kind"] == "readiness_timeout" and cause["unit"] == "ray", cause
    message = cause["message"]
    assert "ray did not form within 40s" in message or "did not form within 40s" in message
    assert "1/2 Ray nodes ALIVE; missing: 1 of node0 (127.0.0.1), node1 (127.0.0.2)" in message
    assert not events_of(run, "launched", unit="benchmark"), "nothing after the gate may start"


def test_a_head_crash_fails_the_job_and_takes_all_of_ray_with_it(
    srt_jobs: Jobs, ray: str, tmp_path: Path
) -> None:
    run = start(srt_jobs, tmp_path, recipe(["sleep", "600"], placement={"node": "head"}))
    run.wait_event("fleet_ready", timeout=RAY_UP, unit="ray")
    head = events_of(run, "launched", unit="ray")[0]["pid"]
    ray_pids = job_pids(run)
    assert head in ray_pids and len(ray_pids) >= 10
    os.kill(head, signal.SIGKILL)  # `ray start --block` dies; its ~20 children are orphaned
    run.wait(120)
    assert run.code != 0
    cause = run.result()["cause"]
    assert (cause["kind"], cause["unit"], cause["step"]) == (
        "critical_service_exit",
        "ray",
        "service_ray",
    ), cause
    wait_for(lambda: not [p for p in ray_pids if psutil.pid_exists(p)], timeout=10)
