"""``srt logs`` of real jobs: selection, prefixes, restarts marked where each attempt's output
begins, and ``-f`` following several services (woken by inotify) across a restart, a
truncation and a rotation until the job ends."""

from __future__ import annotations

import os
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
name: logs
services:
  - name: ticker
    command: [bash, -c, "echo ticker up; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done"]
    readiness: {log: {pattern: ticker up}}
  - name: flaky
    command: [bash, -c, "echo flaky start; sleep 0.3; printf 'unfinished'; exit 3"]
    restart: {backoff_initial_seconds: 0.2, jitter: 0, max_failures: 100}
"""


def follow(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "srt_services", "logs", "-f", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_logs_of_a_running_job_with_restarts(jobs: Jobs) -> None:
    run = jobs.start(RECIPE)
    wait_for(lambda: len(events_of(run, "launched", step="service_flaky")) >= 3, timeout=20)

    both = srt("logs", run.job_dir)
    assert both.returncode == 0, both.stderr
    lines = both.stdout.splitlines()
    # every line carries its instance, padded to one width
    assert all(re.match(r"(service_ticker|service_flaky ) \| ", line) for line in lines), lines
    ticker = [line.split(" | ", 1)[1] for line in lines if line.startswith("service_ticker")]
    assert ticker[:2] == ["ticker up", "tick 0"]
    assert not [t for t in ticker if t.startswith("===")], "one attempt: no marks"
    flaky = [line.split(" | ", 1)[1] for line in lines if line.startswith("service_flaky")]
    marks = [t for t in flaky if t.startswith("===")]
    assert re.fullmatch(r"=== attempt 1 \(pid \d+\) started [-\d]+ [:\d]+ ===", marks[0])
    assert re.fullmatch(
        r"=== attempt 2 \(pid \d+\) started [-\d]+ [:\d]+: restarted after exit 3 ===", marks[1]
    )
    # each mark sits where its attempt began: after the previous one's unfinished line
    first = flaky.index(marks[1])
    assert flaky[first - 2 : first + 2] == ["flaky start", "unfinished", marks[1], "flaky start"]
    pids = [e["pid"] for e in events_of(run, "launched", step="service_flaky")]
    assert [int(m.split("pid ")[1].split(")")[0]) for m in marks] == pids[: len(marks)]

    # selections: a unit, a step, a category, a pattern; only what they name
    for name in ("flaky", "service_flaky", "service_fl*"):
        picked = srt("logs", run.job_dir, name, "--no-prefix")
        assert picked.returncode == 0, picked.stderr
        assert picked.stdout.startswith("=== attempt 1 "), picked.stdout
        assert "tick" not in picked.stdout
    services = srt("logs", run.job_dir, "services", "-n", "1").stdout.splitlines()
    assert {line.split(" | ")[0].strip() for line in services} == {
        "service_ticker",
        "service_flaky",
    }
    one = srt("logs", run.job_dir, "flaky", "-n", "1", "--no-prefix").stdout.splitlines()
    assert len([t for t in one if not t.startswith("===")]) == 1, one
    assert len(one) <= 2 and not one[-1].startswith("==="), one
    tail = srt("logs", run.job_dir, "ticker", "-n", "3").stdout.splitlines()
    assert len(tail) == 3 and tail[-1].startswith("service_ticker | tick ")
    unknown = srt("logs", run.job_dir, "nope")
    assert unknown.returncode == 1
    assert "no unit, step, worker or log file named 'nope'" in unknown.stderr
    assert "(units: flaky, ticker; categories: services, workers)" in unknown.stderr

    # no directory: the latest job under the root, named on stderr
    root = os.path.dirname(run.job_dir)
    latest = srt("logs", "ticker", "-n", "1", env={"SRT_JOB_ROOT": root})
    assert latest.returncode == 0, latest.stderr
    assert latest.stderr == f"srt logs: latest job: {run.job_dir}\n"
    assert latest.stdout.startswith("service_ticker | tick ")
    run.stop()
    run.wait(30)


def _fd_targets(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            continue
    return out


def test_follow_sees_restarts_truncation_and_rotation_until_the_job_ends(
    jobs: Jobs, tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    run = jobs.start(
        f"""
        schema: 2
        observability:
          metrics: false
        name: follow
        services:
          - name: talker
            command: [bash, -c, "echo talker up; i=0; while true; do echo say $i; i=$((i+1)); sleep 0.05; done"]
            readiness: {{log: {{pattern: talker up}}}}
          - name: quiet
            command: [bash, -c, "echo quiet up; exec sleep 1000"]
        benchmark:
          type: command
          command: [bash, -c, "echo bench start; while [ ! -e {stop} ]; do sleep 0.05; done; echo bench done"]
        """
    )
    run.wait_event("launched", unit="benchmark")
    watcher = follow(run.job_dir, "-n", "0")
    wait_for(lambda: "anon_inode:inotify" in _fd_targets(watcher.pid), timeout=20)
    time.sleep(0.5)

    restarted = srt("restart", run.job_dir, "talker")
    assert restarted.returncode == 0, restarted.stderr
    log = Path(run.job_dir) / "logs" / "service_talker.out"
    time.sleep(0.3)
    os.truncate(log, 0)  # copytruncate-style rotation: the service keeps appending
    time.sleep(0.3)
    os.rename(log, log.with_suffix(".out.1"))  # rename-style: the next attempt makes a new file
    restarted = srt("restart", run.job_dir, "talker")
    assert restarted.returncode == 0, restarted.stderr
    time.sleep(0.3)
    stop.touch()
    run.wait(30)
    assert run.code == 0, run.stderr
    out, err = watcher.communicate(timeout=30)
    assert watcher.returncode == 0, err
    lines = out.splitlines()
    talker = [line.split(" | ", 1)[1] for line in lines if line.startswith("service_talker")]
    notes = [t for t in talker if t.startswith(("===", "---"))]
    by_srt = r"restarted by srt restart from uid \d+ \(pid \d+\)"
    patterns = [
        rf"=== attempt 2 \(pid \d+\) started [-\d]+ [:\d]+: {by_srt} ===",
        r"--- log file truncated: following it from its start ---",
        r"--- log file replaced \(rotated\): following the new file ---",
        rf"=== attempt 3 \(pid \d+\) started [-\d]+ [:\d]+: {by_srt} ===",
    ]
    assert len(notes) == len(patterns), notes
    for note, pattern in zip(notes, patterns, strict=True):
        assert re.fullmatch(pattern, note), note
    # each new attempt's first line follows its mark, also when the process wrote before
    # its launch was recorded (before: the mark came a line late)
    for mark in (notes[0], notes[3]):
        assert talker[talker.index(mark) + 1] == "talker up", talker
    assert talker.count("talker up") == 2
    assert [t for t in talker if t.startswith("say ")], "lines were followed as they came"
    # the benchmark's last line, written as the job ended, is there too
    assert "benchmark      | bench done" in lines
    first_talk = next(i for i, line in enumerate(lines) if line.startswith("service_talker"))
    assert lines.index("benchmark      | bench done") > first_talk, "one stream, in order"
