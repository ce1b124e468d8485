"""GMS under ``srt run``, with a STAND-IN for the GPU Memory Service server.

The real ``gpu_memory_service`` needs a CUDA GPU and is not on PyPI, so these tests put a
stand-in module of the same name on the servers' ``PYTHONPATH`` (``standin/``): same
command line (``python3 -m gpu_memory_service --device k``), same socket files in
``GMS_SOCKET_DIR``, runs until SIGTERM. Everything else is real: srt's plan, the supervisor
srt-gms writes and runs, its ``GMS ready:`` line and srt's log probe, the workers' view of
the sockets and lock file, critical failure and teardown.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import JobRun, run_recipe, start_srt
from srt_services.testing.survivors import assert_no_survivors

HERE = Path(__file__).resolve().parent
STANDIN = str(HERE / "standin")
WORKER = [sys.executable, str(HERE / "gms_worker.py")]

pytestmark = [pytest.mark.standin]


def events_of(job: JobRun, name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e for e in job.events()
        if e["event"] == name and all(e.get(k) == v for k, v in match.items())
    ]  # fmt: skip


def recipe(tmp_path: Path, gms_env: dict[str, str] | None = None, extra: str = "") -> str:
    """node0: prefill_0 (GPU 0) and prefill_1 (GPU 1); node1: decode_0 (both GPUs)."""
    env = {"PYTHONPATH": STANDIN, **(gms_env or {})}
    ready = "readiness: {log: {pattern: 'gms worker ready'}, timeout_seconds: 30}"
    text = (
        "schema: 2\n"
        "name: gmsrt\n"
        "resources: {gpus_per_node: 2}\n"
        "engine: {type: vllm, failover: true}\n"
        "observability: {metrics: false}\n"
        'frontend: {type: vllm, command: [sleep, "600"]}\n'
        "roles:\n"
        f"  prefill: {{workers: 2, gpus_per_worker: 1, command: {json.dumps(WORKER)}, {ready}}}\n"
        f"  decode: {{workers: 1, command: {json.dumps(WORKER)}, {ready}}}\n"
        "services:\n"
        f"  - {{name: gms, env: {json.dumps(env)}{extra}}}\n"
    )
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return str(path)


def test_every_worker_gets_its_memory_service_first(tmp_path: Path) -> None:
    job_dir = str(tmp_path / "job")
    job = start_srt(["run", recipe(tmp_path)], job_dir)
    try:
        job.wait_event("serving", timeout=60)
        names = [(e["event"], e.get("step")) for e in job.events()]
        steps = {
            "prefill_0": "service_gms_prefill_0_node0",
            "prefill_1": "service_gms_prefill_1_node0",
            "decode_0": "service_gms_decode_0_node1",
        }
        for worker, gms in steps.items():
            assert names.index(("ready", gms)) < names.index(("launched", worker)), worker
        # one server per GPU of the worker's view, in that view (the stand-in names its
        # sockets after the physical GPU behind device k)
        logs = {w: job.log(w) for w in steps}
        assert "gms worker ready: 2 sockets in" in logs["prefill_0"]
        assert "gpus 0," in logs["prefill_0"] or "gpus 0, lock" in logs["prefill_0"]
        assert "gpus 1, lock" in logs["prefill_1"]
        assert "gms worker ready: 4 sockets in" in logs["decode_0"]
        assert "gpus 0,1, lock" in logs["decode_0"]
        gms_log = job.log("service_gms_decode_0_node1")
        assert "-m gpu_memory_service --device 0" in gms_log
        assert "-m gpu_memory_service --device 1" in gms_log
        assert "GMS ready: 2 device(s), 4 sockets in" in gms_log
        # each worker's directory is its own, under the job's node-local directory
        dirs = {}
        for worker in steps:
            line = next(ln for ln in logs[worker].splitlines() if "gms worker ready" in ln)
            dirs[worker] = line.split(" sockets in ")[1].split(",")[0]
        assert dirs["prefill_0"].endswith("/gms/prefill_0")
        assert dirs["decode_0"].endswith("/gms/decode_0")
        assert len(set(dirs.values())) == 3
        for directory in dirs.values():
            assert os.path.exists(os.path.join(directory, "failover.lock"))
        job.signal(signal.SIGTERM)
        job.wait(timeout=60)
        assert job.code == 143, job.stdout + job.stderr
        for gms in steps.values():
            (exited,) = events_of(job, "exited", step=gms)
            assert exited["code"] == 0  # the supervisor stopped its servers and cleaned up
        for directory in dirs.values():
            assert not os.path.exists(directory)
    finally:
        if job.code is None:
            job.stop()
        assert_no_survivors(job_dir)


def test_a_server_failing_at_start_fails_the_job_before_any_worker(tmp_path: Path) -> None:
    job_dir = str(tmp_path / "job")
    # device 1 exists only on decode_0's node (the prefill workers have one GPU each)
    path = recipe(tmp_path, {"GMS_STANDIN_FAIL_DEVICE": "1"})
    job = run_recipe(path, job_dir, timeout=60)
    try:
        assert job.code == 1, job.stdout + job.stderr
        assert not events_of(job, "launched", step="decode_0")
        assert not events_of(job, "launched", step="prefill_0")
        log = job.log("service_gms_decode_0_node1")
        assert "exited during startup (code=3)" in log
        (gone,) = events_of(job, "exited", step="service_gms_decode_0_node1")
        assert gone["code"] == 3
    finally:
        assert_no_survivors(job_dir)


def test_readiness_timeout_bounds_the_start_up(tmp_path: Path) -> None:
    job_dir = str(tmp_path / "job")
    path = recipe(
        tmp_path,
        {"GMS_STANDIN_NO_SOCKETS": "1"},
        ", readiness: {log: {pattern: 'GMS ready:'}, timeout_seconds: 4}",
    )
    job = run_recipe(path, job_dir, timeout=60)
    try:
        assert job.code == 1, job.stdout + job.stderr
        log = job.log("service_gms_prefill_0_node0")
        assert "GMS startup timed out: 0 of 2 sockets in" in log
        assert "after 3s" in log  # 4 s less the margin that lets this message be seen
        # so srt reports the supervisor's own words as the cause, not its probe's timeout
        cause = job.result()["cause"]
        assert cause["kind"] == "exited_before_ready"
        assert "GMS startup timed out: 0 of 2 sockets" in cause["message"]
        assert not events_of(job, "launched", step="prefill_0")
    finally:
        assert_no_survivors(job_dir)


def test_a_server_that_dies_after_ready_tears_the_job_down(tmp_path: Path) -> None:
    job_dir = str(tmp_path / "job")
    path = recipe(tmp_path, {"GMS_STANDIN_EXIT_AFTER": "3"})
    job = run_recipe(path, job_dir, timeout=60)
    try:
        assert job.code == 1, job.stdout + job.stderr
        (stop,) = events_of(job, "stop_requested")
        assert (stop["cause"]["kind"], stop["cause"]["unit"]) == ("critical_service_exit", "gms")
        logs = "".join(
            job.log(s)
            for s in (
                "service_gms_prefill_0_node0",
                "service_gms_prefill_1_node0",
                "service_gms_decode_0_node1",
            )
        )
        assert "GMS server exited (code=5" in logs
    finally:
        assert_no_survivors(job_dir)
