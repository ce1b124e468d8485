"""``srt logs`` of a real job merges its logs in the order their lines were written (from
the sizes the orchestrator records), and ``--timestamps`` says when, also with ``-f``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from srt_services.testing.jobs import Jobs
from srt_services.testing.jobs import run_srt as srt

# ping and pong take turns (each waits for the other's line, then a second), so the order
# they wrote in is known whatever the machine's load
RECIPE = """
schema: 2
observability:
  metrics: false
name: merged
services:
  - name: ping
    command: [bash, -c, "for i in 1 2 3; do until grep -q \\"pong $((i-1))\\" {job_dir}/logs/service_pong.out 2>/dev/null || [ $i = 1 ]; do sleep 0.05; done; sleep 1; echo ping $i; done; exec sleep 1000"]
  - name: pong
    command: [bash, -c, "for i in 1 2 3; do until grep -q \\"ping $i\\" {job_dir}/logs/service_ping.out 2>/dev/null; do sleep 0.05; done; sleep 1; echo pong $i; done; exec sleep 1000"]
benchmark:
  type: command
  command: [bash, -c, "until grep -q 'pong 3' {job_dir}/logs/service_pong.out; do sleep 0.1; done; sleep 0.6"]
"""
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}"


def test_logs_merge_in_write_order_with_timestamps(jobs: Jobs) -> None:
    run = jobs.start(RECIPE)
    run.wait_event("launched", step="service_pong")
    follower = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "logs", "-f", "-t", run.job_dir, "ping", "pong"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run.wait(120)
    assert run.code == 0, run.stderr
    merged = srt("logs", run.job_dir, "ping", "pong", "--no-prefix").stdout.splitlines()
    want = ["ping 1", "pong 1", "ping 2", "pong 2", "ping 3", "pong 3"]
    assert merged == want
    stamped = srt("logs", run.job_dir, "ping", "pong", "--timestamps").stdout.splitlines()
    pattern = re.compile(rf"(service_ping|service_pong) \| ({STAMP}) (p[io]ng \d)")
    found = [pattern.fullmatch(line) for line in stamped]
    assert all(found), stamped
    assert [m.group(3) for m in found if m] == want
    times = [m.group(2) for m in found if m]
    assert times == sorted(times) and len(set(times)) == len(times), times
    assert (Path(run.job_dir) / "logs" / "service_ping.out.times").exists()
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    followed = [pattern.fullmatch(line) for line in out.splitlines()]
    assert all(followed), out
    assert [m.group(3) for m in followed if m] == want
