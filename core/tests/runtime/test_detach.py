"""``srt run -d``: the job starts in the background and outlives the shell's session;
``srt status``, ``srt logs -f`` and ``srt stop`` work on it; an orchestrator killed with
SIGKILL takes its services down (its watchdog stops them within their stop graces)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from srt_services import procfs
from srt_services.testing.jobs import Jobs, wait_for
from srt_services.testing.jobs import run_srt as srt
from srt_services.testing.survivors import assert_no_survivors

RECIPE = """
schema: 2
observability:
  metrics: false
name: bg
services:
  - name: ticker
    command: [bash, -c, "echo ticker up; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done"]
    readiness: {log: {pattern: ticker up}}
    stop_grace_seconds: 1
  - name: stubborn
    command: [bash, -c, "trap '' TERM; echo stubborn up; while true; do sleep 0.05; done"]
    readiness: {log: {pattern: stubborn up}}
    stop_grace_seconds: 1
"""


def detached(jobs: Jobs, tmp_path: Path, name: str) -> tuple[str, dict[str, int]]:
    recipe = jobs.recipe(RECIPE)
    job_dir = str(tmp_path / name)
    jobs.job_dirs.append(job_dir)  # checked for survivors at teardown
    started = srt("run", "-d", recipe, "--job-dir", job_dir, timeout=180)
    assert started.returncode == 0, started.stderr
    assert started.stdout == job_dir + "\n"
    assert "srt run: detached (orchestrator pid" in started.stderr
    with open(os.path.join(job_dir, "detached.json")) as fh:
        pids = json.load(fh)
    return job_dir, pids


def state_of(job_dir: str) -> dict[str, object]:
    with open(os.path.join(job_dir, "state.json")) as fh:
        data = json.load(fh)
    assert isinstance(data, dict)
    return data


def events(job_dir: str) -> list[dict[str, object]]:
    with open(os.path.join(job_dir, "events.jsonl")) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_a_detached_job_runs_in_its_own_session_and_stops_like_any(
    jobs: Jobs, tmp_path: Path
) -> None:
    job_dir, pids = detached(jobs, tmp_path, "job")
    orch, watchdog = pids["orchestrator"], pids["watchdog"]
    assert os.getsid(orch) == os.getsid(watchdog) == watchdog, "a session of its own"
    assert os.getsid(watchdog) != os.getsid(0)
    assert procfs.alive(orch)
    wait_for(lambda: "ticker up" in (Path(job_dir) / "logs/service_ticker.out").read_text(), 30)

    status = srt("status", job_dir)
    assert status.returncode == 0, status.stderr
    assert f"job bg: running; orchestrator pid {orch} running" in status.stdout

    # a second run -d into the same directory: its orchestrator is refused (the lock), and
    # its watchdog must not take that for a lost job and stop the running one
    again = srt("run", "-d", jobs.recipe(RECIPE), "--job-dir", job_dir, timeout=180)
    assert again.returncode == 1, again
    assert "srt run: the job ended before it was up (exit 1):" in again.stderr
    assert "belongs to a running job" in again.stderr or "is in use" in again.stderr, again.stderr
    assert again.stdout == job_dir + "\n"
    assert procfs.alive(orch) and procfs.alive(watchdog)
    assert state_of(job_dir)["status"] == "running"
    with open(os.path.join(job_dir, "detached.json")) as fh:
        assert json.load(fh) == pids, "the running job's record, not the refused run's"
    assert not [e for e in events(job_dir) if e["event"] == "orchestrator_lost"]

    follower = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "logs", "-f", job_dir, "ticker", "--no-prefix"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)
    stopped = srt("stop", job_dir)
    assert stopped.returncode == 0, stopped.stderr
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    assert "tick " in out, "followed while it ran, ended with the job"
    wait_for(lambda: not procfs.alive(watchdog), 30)
    result = json.loads((Path(job_dir) / "result.json").read_text())
    assert result["status"] == "stopped", result
    own = srt("logs", job_dir, "orchestrator", "--no-prefix")
    assert "job bg started" in own.stdout, own
    assert not [e for e in events(job_dir) if e["event"] == "orchestrator_lost"]
    assert_no_survivors(job_dir)


def test_an_orchestrator_killed_with_sigkill_takes_its_services_down(
    jobs: Jobs, tmp_path: Path
) -> None:
    job_dir, pids = detached(jobs, tmp_path, "job")
    orch, watchdog = pids["orchestrator"], pids["watchdog"]
    wait_for(lambda: state_of(job_dir)["status"] == "running", 30)
    wait_for(
        lambda: all(i["state"] == "ready" for i in state_of(job_dir)["instances"].values()),  # type: ignore[attr-defined]
        30,
    )
    services = [i["pid"] for i in state_of(job_dir)["instances"].values()]  # type: ignore[attr-defined]
    os.kill(orch, signal.SIGKILL)
    # the bound: one tier, its grace of 1 s, then SIGKILL (the stubborn one ignores SIGTERM)
    wait_for(lambda: not procfs.alive(watchdog), 30)
    assert_no_survivors(job_dir, wait=0.0, also=services)
    state = state_of(job_dir)
    assert state["status"] == "stopped"
    assert "srt run -d watchdog" in str(state["stopped_by"])
    assert all(i["state"] == "stopped" for i in state["instances"].values())  # type: ignore[attr-defined]
    (lost,) = [e for e in events(job_dir) if e["event"] == "orchestrator_lost"]
    assert (lost["pid"], lost["signal"]) == (orch, 9)
    (done,) = [e for e in events(job_dir) if e["event"] == "watchdog_stopped"]
    assert "left" not in done
    said = (Path(job_dir) / "logs/orchestrator.out").read_text()
    assert f"the orchestrator (pid {orch}) died (signal 9) without ending the job" in said
    assert "did not exit 1s after SIGTERM; sending SIGKILL" in said
    status = srt("status", job_dir)
    assert "job bg: stopped" in status.stdout, status.stdout


def test_a_bad_recipe_is_refused_before_anything_starts(jobs: Jobs, tmp_path: Path) -> None:
    recipe = jobs.recipe(RECIPE.replace("name: stubborn", "name: stubborn\n    nonsense: 1"))
    job_dir = tmp_path / "never"
    refused = srt("run", "-d", recipe, "--job-dir", str(job_dir))
    assert refused.returncode == 2, refused
    assert "nonsense" in refused.stderr and ":12:5:" in refused.stderr, refused.stderr
    assert not job_dir.exists()
