"""`srt run` of a recipe written for containers: the local launcher runs no images, so the
exporters run their host binaries (the plan's upstream images are for a cluster) and serve
real metrics. Needs Debian's prometheus-node-exporter."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.testing.jobs import Jobs, events_of

pytestmark = pytest.mark.skipif(
    shutil.which("prometheus-node-exporter") is None, reason="needs prometheus-node-exporter"
)

FETCH = r"""
import sys, time, urllib.request
url = sys.argv[1]
for _ in range(100):
    try:
        body = urllib.request.urlopen(url, timeout=2).read().decode()
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("no answer from " + url)
sys.exit(0 if "node_cpu_seconds_total" in body else "no cpu series in " + url)
"""


def test_a_container_job_run_here_runs_the_host_exporter(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    port = srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: imagehere
        container: job-image
        observability: {{metrics: false}}
        benchmark:
          type: command
          command: [python3, -c, {json.dumps(FETCH)}, "http://{{head_ip}}:{port}/metrics"]
        services:
          - name: node-exporter
            type: node-exporter
            placement: {{node: head}}
            options: {{port: {port}, if_missing: fail}}
        """,
        timeout=60,
    )
    assert run.code == 0, run.stdout + run.stderr
    plan = json.loads((Path(run.job_dir) / "plan.json").read_text())
    (unit,) = [u for u in plan["units"] if u["name"] == "node-exporter"]
    (inst,) = unit["instances"]
    assert inst["container"] is None and inst["argv"][0] == "prometheus-node-exporter"
    assert events_of(run, "launched", step="service_node-exporter")
    assert not events_of(run, "unavailable")
