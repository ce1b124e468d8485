"""Two local jobs at once, each with the implied Prometheus and process-exporter at their
default ports: neither collides (before, the second job's Prometheus found 9099 taken)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import Jobs, events_of

pytestmark = pytest.mark.skipif(
    any(shutil.which(b) is None for b in ("prometheus", "prometheus-process-exporter")),
    reason="needs Debian's prometheus and prometheus-process-exporter",
)

RECIPE = """
schema: 2
name: twice
benchmark: {type: command, command: [bash, -c, "sleep 3"]}
"""


def test_two_local_jobs_with_default_ports_both_run(srt_jobs: Jobs) -> None:
    a = srt_jobs.start(RECIPE)
    b = srt_jobs.start(RECIPE)
    for run in (a.wait(120), b.wait(120)):
        assert run.code == 0, run.stderr
        instances = run.state()["instances"]
        states = {step: i["state"] for step, i in instances.items() if step.startswith("service_")}
        assert "failed" not in states.values(), states
        assert events_of(run, "ready", step="service_prometheus")
        assert not events_of(run, "restarting")
    ports = [
        next(u for u in run_plan(r.job_dir) if u["name"] == "prometheus")["instances"][0]["ports"]
        for r in (a, b)
    ]
    assert ports[0] != ports[1]


def run_plan(job_dir: str) -> list[dict[str, Any]]:
    units: list[dict[str, Any]] = json.loads(Path(job_dir, "plan.json").read_text())["units"]
    return units
