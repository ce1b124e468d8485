"""``srt events``: a real job's events.jsonl in words, as JSON Lines, the last N, and
followed (``-f``) until the job ends."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from srt_services.testing.jobs import Jobs, events_of, wait_for
from srt_services.testing.jobs import run_srt as srt

RECIPE = """
schema: 2
observability:
  metrics: false
name: ev
services:
  - name: flaky
    command: [bash, -c, "echo up; sleep 0.3; exit 3"]
    restart: {backoff_initial_seconds: 0.2, jitter: 0, max_failures: 100}
"""

LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +(\+\d+\.\d{3}s|-)  (.+)")


def test_events_in_words_as_json_and_followed(jobs: Jobs) -> None:
    run = jobs.start(RECIPE)
    run.wait_event("job_started")
    follower = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "events", run.job_dir, "-f"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: len(events_of(run, "launched", step="service_flaky")) >= 2, timeout=30)
    time.sleep(0.5)

    shown = srt("events", run.job_dir)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    parsed = [LINE.fullmatch(line) for line in lines]
    assert all(parsed), lines
    texts = [m.group(2) for m in parsed if m]
    assert texts[0].startswith("job ev started (pid ")
    assert parsed[0] and parsed[0].group(1) == "+0.000s"
    assert "service_flaky exited on node0: code 3" in texts
    assert any(
        re.fullmatch(r"service_flaky launched on node0 \(pid \d+, attempt 2\)", t) for t in texts
    )

    as_json = srt("events", run.job_dir, "--json")
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    on_disk = [
        json.loads(line) for line in Path(run.job_dir, "events.jsonl").read_text().splitlines()
    ]
    assert records == on_disk[: len(records)] and len(records) >= len(lines)
    last_two = srt("events", run.job_dir, "-n", "2", "--json").stdout.splitlines()
    assert len(last_two) == 2
    assert srt("events", run.job_dir, "-n", "0").stdout == ""

    run.stop()
    run.wait(30)
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    followed = out.splitlines()
    assert followed[0].endswith(
        "job ev started (pid " + str(run.events()[0]["pid"]) + ", launcher local)"
    )
    assert re.search(r"job finished with exit code \d+$", followed[-1]), followed[-3:]
    assert len(followed) == len(Path(run.job_dir, "events.jsonl").read_text().splitlines())
