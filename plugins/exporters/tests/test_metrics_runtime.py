"""Metrics for real: `srt run` with the Debian node and process exporters, a real Prometheus,
a sidecar serving its own counter, and the dcgm-exporter STAND-IN (no GPU here).

One job per test, on ports the kernel just handed out; every test ends with the
no-survivors check (the ``jobs`` fixture).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from srt_services.testing.jobs import JobRun, Jobs, events_of, wait_for

HERE = Path(__file__).resolve().parent
#: The example's metrics server (examples/metrics.yaml runs it too): one copy for both.
SERVER = str(HERE.parents[2] / "examples" / "local_demo" / "metrics_server.py")
STANDIN = str(HERE / "dcgm_standin.py")

BINARIES = ("prometheus", "prometheus-node-exporter", "prometheus-process-exporter")
pytestmark = [
    pytest.mark.component,
    pytest.mark.skipif(
        any(shutil.which(b) is None for b in BINARIES),
        reason="needs prometheus, prometheus-node-exporter, prometheus-process-exporter (Debian)",
    ),
]


def recipe(ports: dict[str, int], extra_services: str = "") -> str:
    py = json.dumps(sys.executable)
    return f"""
        schema: 2
        name: metricsrt
        resources: {{gpus_per_node: 1}}
        frontend:
          type: sglang
          port: {ports["frontend"]}
          command: [{py}, {SERVER}, "{{node_ip}}", "{ports["frontend"]}", frontend_requests_total]
          readiness: {{http: {{port: {ports["frontend"]}, path: /health}}}}
          metrics: {{port: {ports["frontend"]}}}
        roles:
          agg:
            workers: 1
            port: {ports["worker"]}
            command: [{py}, {SERVER}, "{{node_ip}}", "{{worker_port}}", worker_requests_total]
            readiness: {{http: {{path: /health}}}}
            metrics: {{port: {ports["worker"]}}}
        services:
          - name: prometheus
            type: prometheus
            options: {{port: {ports["prometheus"]}, scrape_interval_seconds: 1}}
          - name: node-exporter
            type: node-exporter
            options: {{port: {ports["node"]}}}
          - name: process-exporter
            type: process-exporter
            options:
              port: {ports["process"]}
              groups: [{{name: sidecar, cmdline: ["sidecar_ticks_total"]}}]
          - name: dcgm-exporter
            type: dcgm-exporter
            options: {{port: {ports["dcgm"]}, binary: {STANDIN}}}
          - name: sidecar
            command: [{py}, {SERVER}, "{{node_ip}}", "{ports["sidecar"]}", sidecar_ticks_total]
            metrics: {{port: {ports["sidecar"]}, path: /metrics}}
            restart: {{backoff_initial_seconds: 2}}
        {extra_services}
        """


def prom(port: int, expr: str) -> list[dict[str, Any]]:
    r = httpx.get(f"http://127.0.0.1:{port}/api/v1/query", params={"query": expr}, timeout=5)
    body = r.json()
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def targets_file(run: JobRun) -> list[dict[str, Any]]:
    with open(os.path.join(run.job_dir, "metrics", "targets.json"), "rb") as fh:
        data: list[dict[str, Any]] = json.loads(fh.read())
    return data


def steps_listed(run: JobRun) -> set[str]:
    return {g["labels"]["step"] for g in targets_file(run)}


@pytest.fixture
def ports(srt_free_port: Callable[[], int]) -> dict[str, int]:
    names = ("frontend", "worker", "prometheus", "node", "process", "dcgm", "sidecar")
    return {n: srt_free_port() for n in names}


@pytest.mark.standin
def test_every_target_is_scraped_and_the_record_outlives_the_job(
    srt_jobs: Jobs, ports: dict[str, int], tmp_path: Path
) -> None:
    run = srt_jobs.start(recipe(ports))
    run.wait_event("serving", timeout=60)
    expected = {
        "prometheus_node0",
        "node_exporter_node0",
        "process_exporter_node0",
        "dcgm_node0",
        "sidecar_node0",
        "agg_0_node0",
        "frontend_node0",
    }
    # srt lists every target whose instance runs, with the labels it promises
    listed = {g["labels"]["instance"]: g for g in targets_file(run)}
    assert set(listed) == expected
    side = listed["sidecar_node0"]
    assert side["targets"] == [f"127.0.0.1:{ports['sidecar']}"]
    assert side["labels"]["service"] == "sidecar"
    assert side["labels"]["role"] == "service"
    assert side["labels"]["node"] == "node0"
    assert side["labels"]["step"] == "service_sidecar"
    assert side["labels"]["job"] == "metricsrt"
    assert listed["agg_0_node0"]["labels"]["role"] == "agg"
    # the process groups file sits beside the logs, where the spec puts it
    with open(os.path.join(run.job_dir, "logs", "process-exporter.yml")) as fh:
        assert '"sidecar"' in fh.read()

    # Prometheus (discovery sends updates every 5 s) finds and scrapes every one of them
    def all_up() -> list[dict[str, Any]] | None:
        up = prom(ports["prometheus"], 'up{job="metricsrt"} == 1')
        return up if {r["metric"]["instance"] for r in up} == expected else None

    up = wait_for(all_up, timeout=40, step=0.5)
    assert all(r["metric"]["job_id"] == os.path.basename(run.job_dir) for r in up)
    ticks = wait_for(
        lambda: prom(ports["prometheus"], 'sidecar_ticks_total{service="sidecar"} > 0'),
        timeout=20,
        step=0.5,
    )
    assert ticks[0]["metric"]["node"] == "node0"
    # the exporters serve what they are there for
    assert prom(ports["prometheus"], 'node_memory_MemTotal_bytes{node="node0"}')
    assert prom(ports["prometheus"], 'namedprocess_namegroup_num_procs{groupname="sidecar"} >= 1')
    assert prom(ports["prometheus"], "DCGM_FI_DEV_GPU_UTIL")  # the stand-in's names

    # a restart: the target leaves file_sd with its process and comes back with the new one
    pid = run.state()["instances"]["service_sidecar"]["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: "service_sidecar" not in steps_listed(run), timeout=10, step=0.01)
    assert "prefill" not in steps_listed(run)
    wait_for(lambda: "service_sidecar" in steps_listed(run), timeout=20, step=0.05)
    relaunched = events_of(run, "launched", step="service_sidecar")
    assert len(relaunched) == 2

    run.stop()
    run.wait(60)
    assert run.state()["status"] == "failed", "stopped by SIGTERM (143): the final state stays"
    assert targets_file(run) == [], "nothing runs: nothing is listed"
    assert os.path.isdir(os.path.join(run.job_dir, "metrics", "tsdb"))
    stops = [e["step"] for e in events_of(run, "exited")]
    assert stops[-1] == "service_prometheus", f"Prometheus must stop last: {stops}"

    # srt metrics on the finished job: Prometheus replays a copy of the record
    out = srt_metrics(run.job_dir, "--json")
    report = json.loads(out)
    assert report["source"]["live"] is False
    rows = {t["instance"]: t for t in report["targets"]}
    assert expected <= set(rows)
    for name in expected:
        assert rows[name]["scrapes"] > 0, rows[name]
    assert rows["sidecar_node0"]["failed"] >= 0
    keys = {h["key"]: h for h in report["headlines"]}
    assert {"cpu_busy", "memory_used", "gpu_util", "process_cpu", "request_rate"} <= set(keys)
    assert keys["memory_used"]["series"][0]["max"] > 0
    assert keys["gpu_util"]["series"][0]["node"] == "node0"
    assert "tsdb" not in os.listdir(tmp_path), "the record is copied, never opened in place"

    # instant queries look at the moment the job was asked to stop, when everything that
    # had not been restarted was still scraped
    query = json.loads(srt_metrics(run.job_dir, "--json", "--query", "node_memory_MemTotal_bytes"))
    assert float(query["result"][0]["value"][1]) > 0
    query = json.loads(
        srt_metrics(run.job_dir, "--json", "--query", "max_over_time(sidecar_ticks_total[1h])")
    )
    assert float(query["result"][0]["value"][1]) > 0

    png = tmp_path / "job.png"
    srt_metrics(run.job_dir, "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = tmp_path / "job.html"
    srt_metrics(run.job_dir, "--plot", str(page))
    assert "data:image/svg+xml;base64," in page.read_text()

    text = srt_metrics(run.job_dir)
    assert "sidecar_node0" in text and "GPU utilisation per node" in text
    assert "targets.json" in text


def srt_metrics(job_dir: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "metrics", job_dir, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.standin
def test_dcgm_exporter_without_nvml_fails_its_instance_not_the_job(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    port = srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: nogpu
        observability: {{metrics: false}}
        benchmark: {{type: command, command: [bash, -c, "sleep 2"]}}
        services:
          - name: dcgm-exporter
            type: dcgm-exporter
            placement: {{node: head}}
            restart: {{policy: "no"}}
            env: {{DCGM_STANDIN_NO_GPU: "1"}}
            options: {{port: {port}, binary: {STANDIN}}}
        """,
        timeout=60,
    )
    assert run.code == 0, run.stderr
    exited = events_of(run, "exited", step="service_dcgm-exporter")
    assert exited and exited[0]["code"] == 1
    assert run.state()["instances"]["service_dcgm-exporter"]["state"] == "failed"
    assert "Failed to initialize NVML" in run.log("service_dcgm-exporter")
