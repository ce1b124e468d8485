"""``srt stop JOBDIR`` ends a job as stopped by the user, not as a failure by SIGTERM, and
the final state leaves no instance in a state only a running job can hold."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess

from srt_services.testing.jobs import Jobs, events_of, run_srt

#: One service that runs until the job is stopped.
SLEEPER = """
schema: 2
observability:
  metrics: false
name: sleeper
services:
  - name: svc
    command: [sleep, "1000"]
"""


def srt_stop(job_dir: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_srt("stop", job_dir, *extra)


def test_a_stopped_benchmark_job_exits_143_as_stopped_not_failed(jobs: Jobs) -> None:
    """Its work was cut short: 128+15, so `srt run ... && next` does not go on."""
    run = jobs.start(
        """
        schema: 2
        observability:
          metrics: false
        name: bench-stop
        services:
          - name: svc
            command: [sleep, "1000"]
        benchmark:
          type: command
          command: [bash, -c, "echo running; sleep 1000"]
        """
    )
    run.wait_event("launched", unit="benchmark")
    stopped = srt_stop(run.job_dir)
    assert stopped.returncode == 0, stopped.stderr
    run.wait(30)
    assert run.code == 143
    result = run.result()
    assert result["status"] == "stopped"
    assert result["exit_code"] == 143
    assert result["cause"]["kind"] == "user_stop"
    assert result["cause"]["signal"] == "SIGTERM"
    assert "stopped by srt stop from " in run.stderr
    assert run.state()["status"] == "stopped"
    (sig,) = events_of(run, "signal")
    assert sig["by"] == result["cause"]["by"]
    assert re.fullmatch(r"\S+@\S+ \(pid \d+\)", sig["by"]), sig
    assert not os.path.exists(os.path.join(run.job_dir, "stop-request.json"))


def test_a_plain_sigterm_is_still_a_signal(jobs: Jobs) -> None:
    """Without the request file the orchestrator cannot tell who sent it: cause ``signal``."""
    run = jobs.start(SLEEPER)
    run.wait_event("serving")
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.code == 143
    assert run.result()["status"] == "failed"
    assert run.result()["cause"]["kind"] == "signal"


def test_a_request_for_another_run_of_the_directory_is_ignored(jobs: Jobs) -> None:
    """A stale request (another cookie) neither counts nor stays behind."""
    run = jobs.start(SLEEPER)
    run.wait_event("serving")
    with open(os.path.join(run.job_dir, "stop-request.json"), "w") as fh:
        fh.write('{"by": "x@y", "pid": 1, "t": 0.0, "cookie": "not-this-job"}')
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.result()["cause"]["kind"] == "signal"
    assert not os.path.exists(os.path.join(run.job_dir, "stop-request.json"))


def test_services_waiting_to_restart_or_never_started_end_stopped(jobs: Jobs) -> None:
    """state.json's final word: no ``backoff`` or ``pending`` once the job is over."""
    run = jobs.start(
        """
        schema: 2
        observability:
          metrics: false
        name: settle
        services:
          - name: flaky
            command: [bash, -c, "exit 3"]
            restart: {backoff_initial_seconds: 60, jitter: 0}
          - name: gate
            command: [bash, -c, "sleep 1000"]
            readiness: {log: {pattern: never-printed}, timeout_seconds: 600}
          - name: later
            command: [sleep, "1000"]
        """
    )
    run.wait_event("restarting", step="service_flaky")
    assert run.state()["instances"]["service_later"]["state"] == "pending"
    stopped = srt_stop(run.job_dir)
    assert stopped.returncode == 0, stopped.stderr
    run.wait(30)
    states = {step: i["state"] for step, i in run.state()["instances"].items()}
    assert states == {
        "service_flaky": "stopped",
        "service_gate": "stopped",
        "service_later": "stopped",
    }
    # stopped while starting up: the job did not get to serve, so 143
    assert run.code == 143
    assert run.result()["status"] == "stopped"


def test_status_after_srt_stop_cleaned_up_a_lost_job_shows_nothing_running(jobs: Jobs) -> None:
    """A lost job that `srt stop` cleaned up reads `stopped`, and so does every instance the
    dead orchestrator last saw ready (no `ready (orchestrator gone)` under `stopped`)."""
    run = jobs.start(SLEEPER)
    run.wait_event("serving")
    os.kill(run.proc.pid, signal.SIGKILL)
    run.wait(10)
    lost = run_srt("status", run.job_dir, "--json")
    assert json.loads(lost.stdout)["status"] == "lost"
    stopped = srt_stop(run.job_dir, "--timeout", "5")
    assert stopped.returncode == 0, stopped.stderr
    data = json.loads(run_srt("status", run.job_dir, "--json").stdout)
    assert data["status"] == "stopped"
    assert [(r["step"], r["state"]) for r in data["instances"]] == [("service_svc", "stopped")]
    text = run_srt("status", run.job_dir).stdout
    assert "orchestrator gone" not in text
    assert re.search(r"^service_svc\s+node0\s+stopped\s", text, re.M), text
