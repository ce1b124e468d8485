"""``srt status`` of a real job, as a pipe and as an 80-column terminal read it."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable

from srt_services.testing.jobs import Jobs, run_srt

RECIPE = """
schema: 2
name: status-text
observability:
  metrics: false
frontend: {{type: none}}
services:
  - name: web
    command: [python3, -m, http.server, "{port}", --bind, "{{node_ip}}"]
    readiness: {{port: {port}}}
  - name: flaky
    command: [sh, -c, "sleep 0.3; exit 3"]
    restart: {{policy: on-failure, backoff_initial_seconds: 60}}
  - name: done
    command: [sh, -c, "sleep 2; echo bye"]
    terminal: true
"""


def srt(*args: str) -> subprocess.CompletedProcess[str]:
    return run_srt(*args, env={"COLUMNS": "40"})  # a pipe ignores it


def test_status_text_of_a_job_with_a_service_in_backoff(
    jobs: Jobs, port: int, on_terminal: Callable[..., str]
) -> None:
    run = jobs.start(RECIPE.format(port=port))
    run.wait_event("ready", step="service_done")
    watch = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "status", "--watch", run.job_dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    run.wait(60)
    assert run.code == 0, run.stderr
    watched, errors = watch.communicate(timeout=30)
    assert watch.returncode == 0, errors
    # One line per change (a clock, then what changed), never a screen redraw.
    assert "\x1b" not in watched
    changes = [line.split(" ", 1)[1] for line in watched.splitlines()]
    assert all(re.fullmatch(r"\d\d:\d\d:\d\d .+", line) for line in watched.splitlines())
    flaky = [c for c in changes if c.startswith("service_flaky:")]
    assert re.fullmatch(r"service_flaky: backoff, pid \d+, exit 3", flaky[-2]), flaky
    # the orchestrator settles it: a service left waiting to restart ended stopped
    assert re.fullmatch(r"service_flaky: stopped, pid \d+, exit 3", flaky[-1])
    web = [c for c in changes if c.startswith("service_web:")]
    assert re.fullmatch(r"service_web: stopped, pid \d+, signal 15 \(SIGTERM\)", web[-1]), web
    assert changes[-1] == "job status-text: succeeded, exit 0, cause: terminal services finished"
    assert len(changes) == len(set(changes))

    result = srt("status", run.job_dir)
    assert result.returncode == 0, result.stderr
    text = result.stdout.splitlines()
    assert text[0].startswith("job status-text: succeeded (exit 0); orchestrator pid ")
    header = text[2].split()
    assert header == [
        "STEP",
        "NODE",
        "STATE",
        "PID",
        "PORTS",
        "UPTIME",
        "RESTARTS",
        "EXIT",
        "READINESS",
        "LOG",
    ]
    rows = {line.split()[0]: line for line in text[3:]}
    assert " stopped " in rows["service_web"]
    assert " signal 15 " in rows["service_web"]  # the launcher's 143, read one way
    assert " stopped " in rows["service_flaky"]
    assert run.state()["instances"]["service_flaky"]["state"] == "stopped"
    assert rows["service_flaky"].endswith(f"{run.job_dir}/logs/service_flaky.out")
    assert " exited " in rows["service_done"]

    for columns in (80, 60):
        shown = on_terminal(columns, "status", run.job_dir)
        assert all(len(line) <= columns for line in shown.splitlines()), shown
        assert "service_flaky" in shown and "stopped" in shown
        assert "(narrow terminal:" in shown


REASONS = """
schema: 2
name: reasons
observability:
  metrics: false
frontend: {type: none}
services:
  - name: refused
    command: [sh, -c, 'echo "no tokens left in pool p" > "$0/srt-exit-reason"; exit 75', "{work_dir}"]
    restart: {policy: "no"}
  - name: quiet
    after: [refused]
    command: [sh, -c, "sleep 0.5; exit 3"]
    restart: {policy: "no"}
benchmark:
  type: command
  command: [sh, -c, 'sleep 1; printf "pool q exhausted\\nsecond line\\n" > "$0/srt-exit-reason"; exit 4', "{work_dir}"]
"""


def test_a_failed_process_s_stated_reason_is_in_events_status_and_cause(jobs: Jobs) -> None:
    run = jobs.run(REASONS, timeout=60)
    assert run.code == 4, run.stderr
    exited = {e["step"]: e for e in run.events() if e["event"] == "exited"}
    assert exited["service_refused"]["reason"] == "no tokens left in pool p"
    assert exited["service_quiet"].get("reason") is None  # it said nothing
    assert exited["benchmark"]["reason"] == "pool q exhausted"  # the first line
    assert run.result()["cause"]["message"] == "benchmark failed (exit code 4): pool q exhausted"
    out = srt("status", run.job_dir).stdout
    row = next(line for line in out.splitlines() if line.startswith("service_refused"))
    assert "failed: no tokens left in pool p" in row
    quiet = next(line for line in out.splitlines() if line.startswith("service_quiet"))
    assert " failed " in quiet + " "
