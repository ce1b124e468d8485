"""`srt metrics --plot` on a real short job: implied Prometheus, node and process
exporters (the Debian binaries), a role and a sidecar each serving its own counter
(examples/local_demo/metrics_server.py). The figure's model is checked, not its pixels:
the series behind each panel, the axes' limits, the phase labels' extents as matplotlib's
renderer measures them. The job ends by itself; the no-survivors check follows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from srt_services.extend import read_job
from srt_services.testing.jobs import Jobs, events_of

pytest.importorskip("matplotlib")

from srt_exporters.plot import _pyplot, collect_panels, figure, phase_marks, title
from srt_exporters.promapi import PromClient
from srt_exporters.summary import job_window
from srt_exporters.viewer import open_source

HERE = Path(__file__).resolve().parent
SERVER = str(HERE.parents[2] / "examples" / "local_demo" / "metrics_server.py")
BINARIES = ("prometheus", "prometheus-node-exporter", "prometheus-process-exporter")
#: Prometheus 2.42 passes what file_sd found to its scrapers at most every 5 s
DISCOVERY_HANDOFF = 5.0
pytestmark = [
    pytest.mark.component,
    pytest.mark.skipif(
        any(shutil.which(b) is None for b in BINARIES),
        reason="needs prometheus, prometheus-node-exporter, prometheus-process-exporter (Debian)",
    ),
]


def recipe(worker_port: int, sidecar_port: int, frontend_port: int) -> str:
    py = json.dumps(sys.executable)
    return f"""
        schema: 2
        name: shortplot
        resources: {{gpus_per_node: 1}}
        frontend:
          type: sglang
          port: {frontend_port}
          command: [{py}, {SERVER}, "{{node_ip}}", "{frontend_port}", frontend_requests_total]
          readiness: {{http: {{port: {frontend_port}, path: /health}}}}
          metrics: {{port: {frontend_port}}}
        roles:
          agg:
            workers: 1
            port: {worker_port}
            command: [{py}, {SERVER}, "{{node_ip}}", "{{worker_port}}", worker_requests_total]
            readiness: {{http: {{path: /health}}}}
            metrics: {{port: {worker_port}}}
        services:
          - name: sidecar
            command: [{py}, {SERVER}, "{{node_ip}}", "{sidecar_port}", sidecar_ticks_total]
            metrics: {{port: {sidecar_port}}}
        benchmark: {{type: command, command: [bash, -c, "sleep 12"]}}
        """


def test_a_short_jobs_plot_has_its_counter_its_groups_and_readable_labels(
    srt_jobs: Jobs, srt_free_port: Any, tmp_path: Path
) -> None:
    run = srt_jobs.run(recipe(srt_free_port(), srt_free_port(), srt_free_port()), timeout=120)
    assert run.code == 0, run.stderr
    job = read_job(run.job_dir)
    w = job_window(job)
    assert w.step == 1.0, "no time limit: the implied Prometheus scrapes every second"
    plt = _pyplot()
    with open_source(job) as source, PromClient(source.url) as client:
        panels = collect_panels(client, job, w)
    fig = figure(plt, panels, phase_marks(job), title(job, w), w)
    try:
        fig.canvas.draw()
        by_title = {p.title: p for p in panels}
        # the sidecar's own counter has a panel, its rate above zero
        counter = by_title["sidecar: sidecar_ticks_total (rate)"]
        assert max(v for _, pts in counter.lines for _, v in pts) > 0
        assert [label for label, _ in counter.lines] == ["sidecar_node0"]
        # so do the role's and the frontend's; nothing of the monitoring stack's own
        own = sorted(p.title for p in panels if ": " in p.title)
        assert own == [
            "agg: worker_requests_total (rate)",
            "frontend: frontend_requests_total (rate)",
            "sidecar: sidecar_ticks_total (rate)",
        ]
        # the job's own processes are grouped by service and role
        groups = {label for label, _ in by_title["CPU per process group (all nodes)"].lines}
        assert {"sidecar", "agg", "frontend"} <= groups, groups
        # percentages from zero to a hundred
        axes = fig.axes[1:]
        for ax, panel in zip(axes, panels, strict=True):
            if panel.unit == "%":
                assert ax.get_ylim()[0] == 0.0 and ax.get_ylim()[1] >= 100.0, panel.title
        assert any(p.unit == "%" for p in panels)
        # the phase labels (all in the first seconds) clear each other and every title
        renderer = fig.canvas.get_renderer()
        labels = list(fig.axes[0].texts)
        assert len(labels) == len(phase_marks(job)) >= 4
        titles = [fig._suptitle, *(ax._left_title for ax in axes)]
        boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels + titles]
        clashes = [
            (a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1 :] if ba.overlaps(bb)
        ]
        assert clashes == []
        # the first points come with the first scrapes, the rates with the second: what
        # Prometheus 2.42 allows (it hands discovered targets to its scrapers every 5 s),
        # counted from its readiness so that a slow launch on a loaded machine is not
        # taken for a blank plot; then every second
        ready = events_of(run, "ready", step="service_prometheus")[0]["t"]
        first = min(pts[0][0] for p in panels for _, pts in p.lines)
        first_rate = min(pts[0][0] for _, pts in counter.lines)
        print(
            f"Prometheus ready {ready - w.start:.1f} s after the start; first point"
            f" {first - w.start:.1f} s, first rate {first_rate - w.start:.1f} s"
        )
        assert first - ready < DISCOVERY_HANDOFF + 3 * w.step
        assert first_rate - ready < DISCOVERY_HANDOFF + 4 * w.step
        steps = [b - a for (a, _), (b, _) in pairwise(counter.lines[0][1])]
        assert max(steps) <= 2 * w.step, "a point per scrape once they started"
    finally:
        plt.close(fig)
    # the command draws the same panels
    svg = tmp_path / "job.svg"
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "metrics", run.job_dir, "--plot", str(svg)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert f"{len(panels)} panel(s) written" in out.stderr
    assert "sidecar: sidecar_ticks_total (rate)" in svg.read_text()
