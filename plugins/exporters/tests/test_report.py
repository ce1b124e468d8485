"""srt-exporters' section of ``srt report``: the charts as inline SVG (axes from zero,
labels escaped), and for real: a short job recorded by the Debian Prometheus and exporters,
its report holding the charts of what was scraped."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest
from srt_exporters.headlines import HEADLINES
from srt_exporters.report import chart, nice_max
from srt_services.testing.jobs import Jobs
from srt_services.testing.jobs import run_srt as srt

CPU = next(h for h in HEADLINES if h.unit == "%")
MEM = next(h for h in HEADLINES if h.unit == "GiB")
SVG = "{http://www.w3.org/2000/svg}"


def _axis_labels(svg: str) -> list[float]:
    root = ElementTree.fromstring(svg)
    texts = [t.text or "" for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    return sorted(float(t) for t in texts if re.fullmatch(r"[\d.]+", t))


def test_percentages_run_from_zero_to_a_hundred() -> None:
    # a CPU at 99.9-100 %: a flat line near the top, not a plunge filling the chart
    svg = chart(CPU, [("node0", [(10.0, 99.9), (15.0, 100.0)])], 10.0, 5.0)
    assert _axis_labels(svg) == [0, 25, 50, 75, 100]
    points = ElementTree.fromstring(svg).find(f"{SVG}polyline")
    assert points is not None
    ys = [float(p.split(",")[1]) for p in (points.get("points") or "").split()]
    assert max(ys) - min(ys) < 1.0


def test_other_axes_start_at_zero_and_end_on_a_round_number() -> None:
    svg = chart(MEM, [("a", [(0.0, 3.1), (1.0, 3.3)])], 0.0, 1.0)
    assert _axis_labels(svg)[0] == 0 and _axis_labels(svg)[-1] == 5
    assert [nice_max(v) for v in (0.0, 0.3, 1.0, 7.0, 130.0, float("nan"))] == [
        1.0, 0.5, 1.0, 10.0, 200.0, 1.0,
    ]  # fmt: skip


def test_labels_from_the_job_are_escaped() -> None:
    evil = "<script>alert(1)</script>"
    svg = chart(MEM, [(evil, [(0.0, 1.0), (1.0, 2.0)])], 0.0, 1.0, [(0.5, evil)])
    root = ElementTree.fromstring(svg)  # well-formed: nothing broke out of its attribute
    assert root.find(f".//{SVG}script") is None
    assert "<script>" not in svg
    series = root.find(f"{SVG}polyline")
    assert series is not None and series.get("data-label") == evil


BINARIES = ("prometheus", "prometheus-node-exporter", "prometheus-process-exporter")


#: The job's main service: it ends once Prometheus holds enough scrapes of a node's idle
#: CPU for the chart's rate (a 4 s window) to have several points. A fixed sleep was not
#: enough on a loaded machine, where scrapes time out (their timeout is the 1 s interval).
UNTIL_SCRAPED = """
import json, sys, time, urllib.parse, urllib.request
query = 'max(count_over_time(node_cpu_seconds_total{mode="idle"}[2m]))'
url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?" + urllib.parse.urlencode({"query": query})
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            result = json.load(answer)["data"]["result"]
        if result and float(result[0]["value"][1]) >= 8:
            sys.exit(0)
    except OSError:  # a loaded Prometheus that did not answer in time: ask again
        pass
    time.sleep(0.5)
sys.exit("fewer than 8 scrapes of node-exporter in 60 s")
"""


@pytest.mark.component
@pytest.mark.skipif(
    any(shutil.which(b) is None for b in BINARIES),
    reason="needs prometheus, prometheus-node-exporter, prometheus-process-exporter (Debian)",
)
def test_the_report_of_a_recorded_job_has_its_charts(
    srt_jobs: Jobs, srt_free_port: Callable[[], int], tmp_path: Path
) -> None:
    script = tmp_path / "until_scraped.py"
    script.write_text(UNTIL_SCRAPED)
    prometheus = srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: repmetrics
        services:
          - name: prometheus
            type: prometheus
            options: {{port: {prometheus}, scrape_interval_seconds: 1}}
          - name: node-exporter
            type: node-exporter
            placement: {{node: head}}
            options: {{port: {srt_free_port()}}}
          - name: main
            terminal: true
            command: [{sys.executable}, {script}, "{prometheus}"]
        """,
        timeout=120,
    )
    assert run.code == 0, run.stderr
    out = tmp_path / "page.html"
    made = srt("report", run.job_dir, "-o", str(out))
    assert made.returncode == 0, made.stderr
    page = out.read_text()
    assert '<section class="plugin-section" data-plugin="srt-exporters' in page
    charts = re.findall(r'<svg class="metrics-chart" data-key="([^"]+)"', page)
    assert "cpu_busy" in charts
    cpu = page[page.index('data-key="cpu_busy"') :]
    cpu = cpu[: cpu.index("</svg>")]
    points = re.search(r'class="series" data-label="node0"[^>]* points="([^"]+)"', cpu)
    assert points is not None and len(points.group(1).split()) >= 2


def test_a_job_without_metrics_gets_no_section(srt_jobs: Jobs, tmp_path: Path) -> None:
    run = srt_jobs.run(
        """
        schema: 2
        name: repnometrics
        observability: {metrics: false}
        services:
          - name: main
            terminal: true
            command: [bash, -c, "exit 0"]
        """
    )
    assert run.code == 0, run.stderr
    made = srt("report", run.job_dir, "-o", "-")
    assert made.returncode == 0, made.stderr
    assert "plugin-section" not in made.stdout and "plugin-error" not in made.stdout
