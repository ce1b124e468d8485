"""``srt report`` on a real job: a service that restarts once and a critical one that fails
(printing a ``<script>``), the page written where asked and read back."""

from __future__ import annotations

import re
from pathlib import Path

from srt_services.testing.jobs import Jobs, events_of
from srt_services.testing.jobs import run_srt as srt

RECIPE = """
schema: 2
name: rep
observability:
  metrics: false
services:
  - name: flaky
    command: [bash, -c, "if [ -e {marker} ]; then echo up; exec sleep 1000; fi; touch {marker}; echo up; sleep 0.5; echo first; exit 3"]
    readiness: {{log: {{pattern: up}}}}
    restart: {{backoff_initial_seconds: 0.2, jitter: 0}}
  - name: broken
    critical: true
    command: [bash, -c, "echo starting; sleep 2.5; echo '<script>document.title=1</script>'; echo 'fatal: no disk'; exit 4"]
"""


def make_failed_job(jobs: Jobs, tmp_path: Path) -> str:
    """A finished job: ``flaky`` restarted once, then ``broken`` failed and ended it."""
    run = jobs.run(RECIPE.format(marker=tmp_path / "marker"), timeout=60)
    assert run.code == 4 or run.code == 1, (run.code, run.stderr)
    assert len(events_of(run, "launched", step="service_flaky")) == 2
    assert run.result()["cause"]["unit"] == "broken"
    return run.job_dir


def test_report_of_a_real_job(jobs: Jobs, tmp_path: Path) -> None:
    job_dir = make_failed_job(jobs, tmp_path)
    out = tmp_path / "page.html"
    made = srt("report", job_dir, "-o", str(out))
    assert made.returncode == 0, made.stderr
    assert made.stdout.strip() == str(out)
    page = out.read_text()
    rows = re.findall(r'<g class="row" data-step="([^"]+)"[^>]*data-state="([^"]+)"'
                      r' data-restarts="(\d+)" data-attempts="(\d+)"', page)  # fmt: skip
    by_step = {step: (state, int(r), int(a)) for step, state, r, a in rows}
    assert by_step["service_flaky"][1:] == (1, 2)
    assert by_step["service_broken"][0] == "failed"
    assert 'data-kind="restart"' in page and 'data-kind="exit"' in page
    assert 'id="cause"' in page and "broken" in page
    assert '<div class="log-tail" data-step="service_broken">' in page
    assert "&lt;script&gt;document.title=1&lt;/script&gt;" in page and "fatal: no disk" in page
    assert "<script>document.title" not in page
    # the default place, and stdout
    assert srt("report", job_dir).stdout.strip() == str(Path(job_dir, "report.html"))
    assert srt("report", job_dir, "-o", "-").stdout.startswith("<!doctype html>")


def test_report_of_a_running_job(jobs: Jobs) -> None:
    """While the job runs: its attempts reach to the last event, the status says running."""
    run = jobs.start(
        """
        schema: 2
        name: live
        observability:
          metrics: false
        services:
          - name: up
            command: [bash, -c, "echo up; exec sleep 1000"]
            readiness: {log: {pattern: up}}
        """
    )
    run.wait_event("serving")
    made = srt("report", run.job_dir, "-o", "-")
    assert made.returncode == 0, made.stderr
    page = made.stdout
    assert 'id="job-status">running<' in page
    assert re.search(r'data-step="service_up"[^>]*data-state="ready"', page)
    assert 'class="span-ready span-open"' in page
    assert 'class="log-tail"' not in page and 'id="cause"' not in page
    run.stop()
    run.wait(30)
