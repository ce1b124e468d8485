"""``srt exec JOBDIR SERVICE -- CMD`` on a real local job: the instance's environment
(recipe env, SRT_* variables; not the job's cookie), its working directory and node; the
command's exit status; refusals."""

from __future__ import annotations

import os
from pathlib import Path

from srt_services.testing.jobs import Jobs, start_srt, wait_for
from srt_services.testing.jobs import run_srt as srt

RECIPE = """
schema: 2
observability:
  metrics: false
name: ex
services:
  - name: web
    command: [bash, -c, "echo up; exec sleep 1000"]
    readiness: {log: {pattern: up}}
    env: {GREETING: "hello there", WHERE: "{node_ip}"}
  - name: flaky
    command: [bash, -c, "exit 3"]
    restart: {backoff_initial_seconds: 30, jitter: 0}
"""


def test_exec_runs_as_the_instance_runs(jobs: Jobs, tmp_path: Path) -> None:
    home = tmp_path / "started-here"
    home.mkdir()
    job_dir = str(tmp_path / "job")
    jobs.job_dirs.append(job_dir)
    run = start_srt(["run", jobs.recipe(RECIPE)], job_dir, cwd=str(home))
    jobs.runs.append(run)
    run.wait_event("ready", step="service_web")
    web = wait_for(lambda: run.state()["instances"]["service_web"]["pid"], 30)

    shown = srt(
        "exec", job_dir, "web", "--", "bash", "-c",
        'printf "%s|%s|%s|%s|%s" "$PWD" "$GREETING" "$WHERE" "$SRT_INSTANCE" "$SRT_NODE"; exit 7',
        cwd=str(tmp_path),
    )  # fmt: skip
    assert shown.returncode == 7, shown.stderr
    assert shown.stdout == f"{home}|hello there|127.0.0.1|service_web|node0"
    assert shown.stderr == f"srt exec: as service_web (pid {web}) on node0 (127.0.0.1)\n"
    # everything but the job's cookie: the teardown stops what carries it by process
    # group, and the command's group is the caller's (here: pytest's)
    with open(f"/proc/{web}/environ", "rb") as fh:
        assert b"SRT_JOB_COOKIE=" in fh.read()
    same = srt("exec", "-q", job_dir, "service_web", "printenv", "SRT_JOB_COOKIE")
    assert (same.returncode, same.stdout, same.stderr) == (1, "", "")

    nosuch = srt("exec", job_dir, "nope", "--", "true")
    assert (
        nosuch.returncode == 1 and "no unit, step, worker or log file named 'nope'" in nosuch.stderr
    )
    wait_for(lambda: run.state()["instances"]["service_flaky"]["state"] == "backoff", 30)
    down = srt("exec", job_dir, "flaky", "--", "true")
    assert down.returncode == 1
    assert "service_flaky is not running (backoff)" in down.stderr
    missing = srt("exec", job_dir, "web", "--", "no-such-program-here")
    assert missing.returncode == 127 and "cannot execute no-such-program-here" in missing.stderr

    run.stop()
    run.wait(30)
    ended = srt("exec", job_dir, "web", "--", "true")
    assert ended.returncode == 1 and "has ended: nothing runs to exec into" in ended.stderr
    assert os.path.isdir(job_dir)
