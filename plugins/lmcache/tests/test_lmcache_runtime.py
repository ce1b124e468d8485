"""LMCache for real: ``srt run`` starts the LMCache server a recipe implies, workers talk to
it through LMCache's own client code, and nothing of the job survives it.

CPU only (torch's CPU wheel, ``lmcache`` from PyPI); every server gets a 0.25 GB L1 (about
0.7 GB of RSS) and ports the kernel just handed out. The ``lmcache`` tox environment sets
SRT_REQUIRE_LMCACHE=1, so these fail there instead of skipping when LMCache is missing.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import JobRun, free_port, run_recipe, start_srt
from srt_services.testing.survivors import assert_no_survivors

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "lmcache-local.yaml"
CLIENT = str(REPO / "examples" / "lmcache_demo" / "client.py")

if os.environ.get("SRT_REQUIRE_LMCACHE") != "1":
    pytest.importorskip("lmcache", reason="needs LMCache (pip install torch==<cpu> lmcache)")

pytestmark = [pytest.mark.component, pytest.mark.slow]


def events_of(job: JobRun, name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e for e in job.events()
        if e["event"] == name and all(e.get(k) == v for k, v in match.items())
    ]  # fmt: skip


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return str(path)


def server_entry(port: int, http_port: int, extra: str = "") -> str:
    """The implied server, changed by name only where a test machine needs it: its own
    ports, and a small L1 (the default 8 GB is for real nodes)."""
    return (
        f"  - {{name: lmcache-server, placement: {{node: decode}}, options: {{port: {port},"
        f" http_port: {http_port}, l1_size_gb: 0.25}}{extra}}}\n"
    )


def vllm_recipe(port: int, http_port: int, benchmark: bool = True) -> str:
    worker = [
        sys.executable, CLIENT, "vllm", f"tcp://localhost:{port}", f"http://127.0.0.1:{http_port}",
    ]  # fmt: skip
    check = [sys.executable, CLIENT, "check", f"http://127.0.0.1:{http_port}", "lmcache-server"]
    bench = f"benchmark: {{type: command, command: {json.dumps(check)}}}\n" if benchmark else ""
    return (
        "schema: 2\n"
        "name: lmcrt\n"
        "resources: {gpus_per_node: 1}\n"
        "engine: {type: vllm}\n"
        "observability: {metrics: false}\n"
        'frontend: {type: vllm, command: [sleep, "600"]}\n'
        "roles:\n"
        "  decode:\n"
        "    connector: lmcache-mp\n"
        f"    command: {json.dumps(worker)}\n"
        "    readiness: {log: {pattern: 'lmcache worker ready'}, timeout_seconds: 120}\n"
        f"{bench}"
        "services:\n"
        f"{server_entry(port, http_port)}"
    )


def test_a_vllm_role_with_lmcache_mp_gets_its_server(tmp_path: Path) -> None:
    port, http_port = free_port(), free_port()
    job_dir = str(tmp_path / "job")
    job = run_recipe(write(tmp_path, vllm_recipe(port, http_port)), job_dir, timeout=240)
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert job.result()["cause"]["kind"] == "benchmark_exit"
        names = [(e["event"], e.get("step")) for e in job.events()]
        # the server is ready before the worker that uses it is launched
        ready = names.index(("ready", "service_lmcache-server"))
        assert ready < names.index(("launched", "decode_0"))
        # it is the implied one, changed by name: the plan keeps why it runs
        with open(os.path.join(job_dir, "plan.json"), "rb") as fh:
            plan = json.loads(fh.read())
        (unit,) = [u for u in plan["units"] if u["name"] == "lmcache-server"]
        assert unit["replaces_implied"] == "decode connector lmcache-mp"
        worker = job.log("decode_0")
        assert f"lmcache worker ready (vllm): tcp://localhost:{port} chunk_size=256 ping=True" in (
            worker
        )
        assert "check ok: lmcache-server healthy" in job.log("benchmark")
        server = job.log("service_lmcache-server")
        assert f"running on 127.0.0.1:{port}" in server
        (stopped,) = events_of(job, "exited", step="service_lmcache-server")
        assert stopped["code"] in (0, 143)  # SIGTERM at teardown, nothing else
    finally:
        assert_no_survivors(job_dir)


def test_sglang_workers_find_the_server_through_the_environment(tmp_path: Path) -> None:
    port, http_port = free_port(), free_port()
    job_dir = str(tmp_path / "job")
    # two virtual nodes, a server on each (placement workers): each worker is told its own
    worker = [sys.executable, CLIENT, "sglang", f"http://{{node_ip}}:{http_port}"]
    text = (
        "schema: 2\n"
        "name: lmcsg\n"
        "resources: {gpus_per_node: 1}\n"
        "engine: {type: sglang}\n"
        "observability: {metrics: false}\n"
        'frontend: {type: sglang, command: [sleep, "600"]}\n'
        "roles:\n"
        "  decode:\n"
        "    workers: 2\n"
        f"    command: {json.dumps(worker)}\n"
        "    args: [--enable-lmcache]\n"
        "    readiness: {log: {pattern: 'lmcache worker ready'}, timeout_seconds: 120}\n"
        "services:\n"
        f"  - {{name: cache, type: lmcache-server, options: {{port: {port},"
        f" http_port: {http_port}, l1_size_gb: 0.25}}}}\n"
    )
    job = start_srt(["run", write(tmp_path, text)], job_dir)
    try:
        job.wait_event("serving", timeout=240)
        for step, ip in (("decode_0", "127.0.0.1"), ("decode_1", "127.0.0.2")):
            assert f"lmcache worker ready (sglang): tcp://{ip}:{port} chunk_size=256" in job.log(
                step
            )
        assert {e["node"] for e in events_of(job, "ready", unit="cache")} == {"node0", "node1"}
        job.signal(signal.SIGTERM)
        job.wait(timeout=60)
        assert job.code == 143, job.stdout + job.stderr  # stopped by the signal, as asked
    finally:
        if job.code is None:
            job.stop()
        assert_no_survivors(job_dir)


def test_telemetry_stays_off_and_a_server_killed_mid_run_tears_the_job_down(
    tmp_path: Path,
) -> None:
    port, http_port = free_port(), free_port()
    job_dir = str(tmp_path / "job")
    # a recipe value cannot switch the vendor's usage reports back on
    text = vllm_recipe(port, http_port, False).replace(
        "l1_size_gb: 0.25}", "l1_size_gb: 0.25}, env: {LMCACHE_TRACK_USAGE: 'true'}"
    )
    job = start_srt(["run", write(tmp_path, text)], job_dir)
    try:
        job.wait_event("serving", timeout=240)
        pid = job.state()["instances"]["service_lmcache-server"]["pid"]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            assert b"lmcache" in fh.read()  # the server, not a reused PID
        # what the server process really has in its environment
        with open(f"/proc/{pid}/environ", "rb") as fh:
            env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
        assert env[b"LMCACHE_TRACK_USAGE"] == b"false"
        assert env[b"DO_NOT_TRACK"] == b"1"
        os.kill(pid, signal.SIGKILL)
        job.wait(timeout=60)
        assert job.code == 1, job.stdout + job.stderr
        (stop,) = events_of(job, "stop_requested")
        assert (stop["cause"]["kind"], stop["cause"]["unit"]) == (
            "critical_service_exit", "lmcache-server",
        )  # fmt: skip
        assert events_of(job, "exited", step="decode_0")
    finally:
        if job.code is None:
            job.signal(signal.SIGKILL)
            job.wait(10)
        assert_no_survivors(job_dir)


def test_the_example_runs(tmp_path: Path) -> None:
    """examples/lmcache-local.yaml as a user runs it (its default ports 8750/8751), with
    this environment's python3 first on PATH (the one LMCache is installed in)."""
    job_dir = str(tmp_path / "job")
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    job = run_recipe(str(EXAMPLE), job_dir, timeout=240, env={"PATH": path})
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert "lmcache worker ready (vllm): tcp://localhost:8750" in job.log("decode_0")
        assert "check ok: lmcache-server healthy" in job.log("benchmark")
    finally:
        assert_no_survivors(job_dir)
