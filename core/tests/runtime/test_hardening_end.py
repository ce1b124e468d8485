"""Issue 31, item 6: one truth about how a job ended. ``srt stop`` sent while the job ends
on its own, at every moment around that end; a flood of stop signals across the end; a
stop signal during a storm of thousands of forks. In each case the exit status of ``srt
run``, ``result.json``, the last ``job_finished`` event and what ``srt stop`` says agree,
no stop request is left in the job directory, and nothing prints a traceback.

ID (docs/fault-matrix.md): H28 (stop against the end), H29 (signal floods).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import JobRun, Jobs, events_of
from srt_services.testing.jobs import run_srt as srt


def bench_recipe(marker: Path, delay: float) -> str:
    """A service, and a benchmark that exits 0 ``delay`` seconds after ``marker`` appears."""
    return f"""
        schema: 2
        observability:
          metrics: false
        name: race
        services:
          - name: svc
            command: [sleep, "1000"]
        benchmark:
          type: command
          command: [bash, -c, "while [ ! -e {marker} ]; do sleep 0.01; done; sleep {delay}; echo done"]
        """


def agree(run: JobRun, stop_said: str | None = None) -> dict[str, Any]:
    """The exit status, result.json and the last job_finished event tell one story; so
    does ``srt stop``'s last line when one ran."""
    result = run.result()
    (finished,) = events_of(run, "job_finished")
    assert run.code == result["exit_code"] == finished["code"], (run.code, result, finished)
    assert run.events()[-1]["event"] == "job_finished" or all(
        e["event"] == "signal" for e in run.events()[run.events().index(finished) :][1:]
    )
    state = run.state()
    assert state["status"] == {"succeeded": "finished"}.get(result["status"], result["status"])
    assert not os.path.exists(os.path.join(run.job_dir, "stop-request.json"))
    assert "Traceback" not in run.stderr and "Exception ignored" not in run.stderr
    if stop_said is not None:
        if result["status"] == "stopped":
            assert result["cause"]["kind"] == "user_stop"
            assert stop_said.splitlines()[-1] == "srt stop: stopped", stop_said
        else:
            assert result["status"] == "succeeded" and run.code == 0, result
            assert "ended on its own" in stop_said or "already ended" in stop_said, stop_said
    return result


@pytest.mark.parametrize("offset", [-0.2, -0.05, -0.02, 0.0, 0.01, 0.02, 0.05, 0.1, 0.3])
def test_H28_a_stop_around_the_jobs_own_end_tells_one_story(
    jobs: Jobs, tmp_path: Path, offset: float
) -> None:
    """The benchmark exits ``delay`` after the marker; ``srt stop`` starts ``delay +
    offset`` after it: before, during and after the end (the teardown, the final writes,
    srt run's exit). Whichever wins, everything says the same."""
    marker = tmp_path / "go"
    delay = 0.3
    run = jobs.start(bench_recipe(marker, delay))
    run.wait_event("launched", unit="benchmark")
    marker.touch()
    time.sleep(max(0.0, delay + offset))
    stopped = srt("stop", run.job_dir)
    run.wait(60)
    assert stopped.returncode == 0, stopped.stderr
    assert "Traceback" not in stopped.stderr
    agree(run, stopped.stderr.strip())


def test_H28_srt_stop_of_a_job_that_ended_says_so_and_keeps_its_record(
    jobs: Jobs, tmp_path: Path
) -> None:
    marker = tmp_path / "go"
    marker.touch()
    run = jobs.start(bench_recipe(marker, 0))
    run.wait(60)
    assert run.code == 0
    stopped = srt("stop", run.job_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert "the job has already ended (succeeded, exit code 0" in stopped.stderr
    result = agree(run)
    assert result["status"] == "succeeded"


def test_H29_a_flood_of_stop_signals_across_the_end_changes_nothing(
    jobs: Jobs, tmp_path: Path
) -> None:
    """SIGTERM every millisecond from just before the benchmark's exit until srt run has
    exited: the first one to land decides; each later one finds the end decided; none kills
    srt run with 143 over a job that ended otherwise."""
    marker = tmp_path / "go"
    run = jobs.start(bench_recipe(marker, 0.2))
    run.wait_event("launched", unit="benchmark")
    marker.touch()
    time.sleep(0.19)
    sent = 0
    while run.proc.poll() is None:
        try:
            os.kill(run.proc.pid, signal.SIGTERM)
            sent += 1
        except ProcessLookupError:
            break
        time.sleep(0.001)
    run.wait(60)
    assert sent > 10
    result = agree(run)
    if result["status"] == "succeeded":
        assert run.code == 0
    else:  # the first signal came before the benchmark's exit
        assert result["cause"]["kind"] == "signal" and run.code == 143


FORKER = r"""
import os, sys, time
# a storm: thousands of short-lived orphans, each reaped by the orchestrator (subreaper)
print("storming", flush=True)
while True:
    for _ in range(200):
        if os.fork() == 0:
            if os.fork() == 0:
                os._exit(0)
            os._exit(0)
    for _ in range(200):
        try:
            os.wait()
        except ChildProcessError:
            break
"""


def test_H29_a_stop_during_a_fork_storm_is_never_lost_and_prints_nothing(
    jobs: Jobs, tmp_path: Path
) -> None:
    script = tmp_path / "forker.py"
    script.write_text(FORKER)
    run = jobs.start(
        f"""
        schema: 2
        observability:
          metrics: false
        name: storm
        services:
          - name: storm
            command: [{sys.executable}, {script}]
            readiness: {{log: {{pattern: storming}}}}
        """
    )
    run.wait_event("serving")
    time.sleep(2.0)  # thousands of SIGCHLD by now
    stopped = subprocess.run(
        [sys.executable, "-m", "srt_services", "stop", run.job_dir],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    run.wait(120)
    assert stopped.returncode == 0, stopped.stderr
    result = agree(run, stopped.stderr.strip())
    assert result["status"] == "stopped" and run.code == 0


def test_H29_a_stop_signal_behind_a_full_wakeup_socket_is_not_lost(tmp_path: Path) -> None:
    """The orchestrator's loop busy while 1,500 SIGCHLD fill its wake-up socket, then a
    SIGTERM: the stop is seen, and nothing is printed (asyncio's dispatch dropped it and
    printed "Exception ignored ... signal wakeup fd" for each signal)."""
    helper = Path(__file__).parent / "helpers" / "sigflood.py"
    done = subprocess.run(
        [sys.executable, str(helper), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "stopped [('signal', 143)]", done.stdout
    assert done.stderr == ""
