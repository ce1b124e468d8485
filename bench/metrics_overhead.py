"""Metrics overhead (issue 15): Prometheus + exporters next to a job of 50 services.

Two jobs, back to back, the same 50 services (each a small HTTP server with a `metrics:`
annotation, so Prometheus has 50 targets of its own to scrape), one worker and a frontend:

* ``metrics off`` (the raw baseline): ``observability.metrics: false``;
* ``metrics on``: the default, so srt-exporters implies node-exporter, process-exporter and
  a Prometheus scraping every target (dcgm-exporter is skipped: no GPU here), at the default
  15 s interval (``--interval``).

Measured over ``--window`` seconds once the job has served for ``--settle`` seconds (the
start-up of Prometheus and its first discovery are left out): the CPU time of every process
of the job *besides* the services, the worker and the frontend themselves (the orchestrator,
the exporters, Prometheus), as a percentage of one core. The overhead is (on - off); the
target is < 5 % of one core at 15 s. Also reported: Prometheus's own
``scrape_duration_seconds`` over the targets (mean, max), and its samples per scrape.

    .venv/bin/python bench/metrics_overhead.py [--services 50] [--window 60] [--interval 15]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _jobs import Job, drop_scratch

SERVER = str(Path(__file__).resolve().parents[1] / "examples" / "local_demo" / "metrics_server.py")
BASE_PORT = 21000


def recipe(
    name: str, services: int, metrics: bool, interval: float, prom_port: int
) -> dict[str, Any]:
    svc: list[dict[str, Any]] = [
        {
            "name": f"s{i}",
            "command": [
                sys.executable,
                "-S",
                SERVER,
                "{node_ip}",
                str(BASE_PORT + i),
                f"s{i}_total",
            ],
            "metrics": {"port": BASE_PORT + i},
        }
        for i in range(services)
    ]
    if metrics:
        svc.append(
            {
                "name": "prometheus",
                "type": "prometheus",
                "options": {"port": prom_port, "scrape_interval_seconds": interval},
            }
        )
        svc.append(
            {"name": "node-exporter", "type": "node-exporter", "options": {"port": prom_port + 1}}
        )
        svc.append(
            {
                "name": "process-exporter",
                "type": "process-exporter",
                "options": {"port": prom_port + 2},
            }
        )
    sleeper = [sys.executable, "-S", "-c", "import time; time.sleep(3600)"]
    return {
        "schema": 2,
        "name": name,
        "observability": {"metrics": metrics},
        "resources": {"gpus_per_node": 1},
        "frontend": {"type": "sglang", "command": sleeper},
        "roles": {"agg": {"workers": 1, "command": sleeper}},
        "services": svc,
    }


def cpu_of_groups(pgids: set[int], extra: list[int]) -> float:
    """user+system seconds of every live process in these process groups (and ``extra``)."""
    total = 0.0
    for p in psutil.process_iter(["pid"]):
        try:
            if p.pid in extra or psutil.os.getpgid(p.pid) in pgids:
                t = p.cpu_times()
                total += t.user + t.system
        except (psutil.Error, ProcessLookupError, OSError):
            continue
    return total


def measure(job: Job, services: int, settle: float, window: float) -> tuple[float, dict[str, Any]]:
    job.wait_for(lambda ev: any(e["event"] == "serving" for e in ev), timeout=120)
    time.sleep(settle)
    state = json.loads((job.dir / "state.json").read_text())
    own = {f"service_s{i}" for i in range(services)} | {"agg_0", "frontend"}
    pgids = {
        i["pgid"] for step, i in state["instances"].items() if step not in own and i.get("pgid")
    }
    t0 = time.monotonic()
    c0 = cpu_of_groups(pgids, [job.pid])
    time.sleep(window)
    c1 = cpu_of_groups(pgids, [job.pid])
    elapsed = time.monotonic() - t0
    return 100.0 * (c1 - c0) / elapsed, state


def prom_query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        result: list[dict[str, Any]] = json.load(r)["data"]["result"]
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--services", type=int, default=50)
    ap.add_argument("--window", type=float, default=60.0)
    ap.add_argument("--settle", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=15.0)
    ap.add_argument("--prom-port", type=int, default=20900)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="srt-bench-metrics-"))
    results: dict[str, float] = {}
    scrape: dict[str, Any] = {}
    try:
        for label, on in (("off", False), ("on", True)):
            job = Job(
                root,
                f"m{label}",
                recipe(f"m{label}", args.services, on, args.interval, args.prom_port),
            )
            job.start()
            try:
                pct, _ = measure(job, args.services, args.settle, args.window)
                results[label] = pct
                if on:
                    port = args.prom_port
                    up = prom_query(port, "up")
                    dur = [
                        float(r["value"][1]) for r in prom_query(port, "scrape_duration_seconds")
                    ]
                    samples = prom_query(port, "sum(scrape_samples_scraped)")
                    scrape = {
                        "targets": len(up),
                        "up": sum(1 for r in up if r["value"][1] == "1"),
                        "mean_ms": 1000 * sum(dur) / len(dur) if dur else float("nan"),
                        "max_ms": 1000 * max(dur) if dur else float("nan"),
                        "samples": float(samples[0]["value"][1]) if samples else 0.0,
                    }
            finally:
                job.stop(60)
                job.report_problems(job.cleanup())
    finally:
        drop_scratch(root, args.keep)
    over = results["on"] - results["off"]
    print(
        f"job: {args.services} services (+1 worker, frontend); window {args.window:g} s after {args.settle:g} s"
    )
    print(
        f"  CPU of the job besides its services, metrics off (raw baseline): {results['off']:6.2f} % of a core"
    )
    print(
        f"  CPU of the job besides its services, metrics on ({args.interval:g} s):     {results['on']:6.2f} % of a core"
    )
    print(
        f"  overhead of Prometheus + exporters: {over:6.2f} % of a core"
        f" (target < 5 %: {'met' if over < 5 else 'MISSED'})"
    )
    if scrape:
        print(
            f"  Prometheus: {scrape['up']}/{scrape['targets']} targets up; scrape_duration_seconds"
            f" mean {scrape['mean_ms']:.1f} ms, max {scrape['max_ms']:.1f} ms;"
            f" {scrape['samples']:.0f} samples per round"
        )


if __name__ == "__main__":
    main()
