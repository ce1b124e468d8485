"""``srt ps`` / ``srt jobs`` over real job directories (finished, running, with a killed
orchestrator, corrupt, a Slurm submission), and ``srt status`` without a directory."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from srt_services.testing.jobs import Jobs

DONE = """
schema: 2
observability:
  metrics: false
name: done
services:
  - name: end
    terminal: true
    command: [bash, -c, "exit 3"]
"""
SERVING = """
schema: 2
observability:
  metrics: false
name: serving
services:
  - name: svc
    command: [sleep, "1000"]
"""


def srt(
    *args: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        # no Slurm to ask here: a submitted job is what its record says
        env={**{k: v for k, v in os.environ.items() if not k.startswith("SLURM")}, **(env or {})},
        cwd=cwd,
    )


def age(path: Path, seconds_ago: float) -> None:
    """Make the job in ``path`` look as if it started ``seconds_ago``."""
    import time

    t = time.time() - seconds_ago
    for name in ("plan.json", "job.json", "state.json"):
        if (path / name).exists():
            os.utime(path / name, (t, t))


def test_ps_lists_every_kind_of_job_newest_first(
    jobs: Jobs, tmp_path: Path, on_terminal: Callable[..., str]
) -> None:
    root = tmp_path / "root"
    finished = jobs.run(DONE, job_dir=str(root / "a-finished"))
    assert finished.code == 3
    age(root / "a-finished", 500)

    dead = jobs.start(SERVING, job_dir=str(root / "b-dead"))
    dead.wait_event("serving")
    os.kill(dead.state()["orchestrator"]["pid"], signal.SIGKILL)
    dead.wait(30)
    age(root / "b-dead", 400)

    corrupt = root / "c-corrupt"
    corrupt.mkdir()
    (corrupt / "state.json").write_text('{"version": 1, "job_name": 7}')
    age(corrupt, 300)

    submitted = root / "d-submitted"
    submitted.mkdir()
    (submitted / "job.json").write_text(
        json.dumps({"job_id": "4242", "submitted": 1.0e9, "script": "x", "nodes": 3})
    )
    age(submitted, 200)

    running = jobs.start(SERVING, job_dir=str(root / "e-running"))
    running.wait_event("serving")

    listed = srt("ps", "--root", str(root))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == [
        "JOB", "NAME", "STATE", "STARTED", "DURATION", "EXIT", "NODES", "SLURM",
    ]  # fmt: skip
    rows = [line.split() for line in lines[1:]]
    assert [r[0] for r in rows] == [
        "e-running",
        "d-submitted",
        "c-corrupt",
        "b-dead",
        "a-finished",
    ]
    by_job = {r[0]: r for r in rows}
    assert by_job["e-running"][1:3] == ["serving", "running"]
    assert by_job["e-running"][-3:] == ["-", "1", "-"]
    assert by_job["a-finished"][1:3] == ["done", "failed"]
    assert by_job["a-finished"][-3:] == ["3", "1", "-"]
    assert by_job["b-dead"][2] == "lost"
    assert by_job["c-corrupt"][1:3] == ["-", "unreadable"]
    # Slurm cannot be asked here: the record's own word, its id and node count
    assert by_job["d-submitted"][2] == "submitted"
    assert by_job["d-submitted"][-2:] == ["3", "4242"]

    as_json = json.loads(srt("jobs", "--root", str(root), "--json", "-n", "2").stdout)
    assert as_json["root"] == str(root)
    first, second = as_json["jobs"]
    assert first["job_dir"] == str(root / "e-running")
    assert first["state"] == "running" and first["exit_code"] is None
    assert first["duration"] is not None and first["duration"] >= 0
    assert second["slurm_job_id"] == "4242" and second["nodes"] == 3
    full = json.loads(srt("ps", "--root", str(root), "--json").stdout)["jobs"]
    corrupt_row = next(j for j in full if j["state"] == "unreadable")
    assert "job_name" in corrupt_row["error"]
    finished_row = next(j for j in full if j["job"] == "done")
    assert finished_row["duration"] == finished_row["ended"] - finished_row["started"]

    for columns in (80, 50):
        shown = on_terminal(columns, "ps", "--root", str(root))
        assert all(len(line) <= columns for line in shown.splitlines()), shown
        assert "e-running" in shown and "running" in shown

    # srt status without a directory: the newest job, named on stderr
    shown = srt("status", env={"SRT_JOB_ROOT": str(root)})
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr == f"srt status: latest job: {root / 'e-running'}\n"
    assert shown.stdout.startswith("job serving: running")

    # srt stop cleans up after the dead one, which then reads stopped
    cleaned = srt("stop", str(root / "b-dead"))
    assert cleaned.returncode == 0, cleaned.stderr
    after = {r.split()[0]: r.split() for r in srt("ps", "--root", str(root)).stdout.splitlines()}
    assert after["b-dead"][2] == "stopped"
    running.stop()
    running.wait(30)


def test_the_default_root_is_the_users_whatever_the_directory(tmp_path: Path) -> None:
    """A job started without --job-dir in one directory is found from any other (before:
    ./srt-jobs, so `srt status` elsewhere said no jobs); --root and SRT_JOB_ROOT override;
    a job's name under the root stands for its directory."""
    home, here, there = tmp_path / "home", tmp_path / "a", tmp_path / "b"
    for d in (home, here, there):
        d.mkdir()
    user = {"HOME": str(home), "SRT_JOB_ROOT": "", "XDG_STATE_HOME": ""}
    root = home / ".local" / "state" / "srt" / "jobs"
    empty = srt("ps", cwd=str(there), env=user)
    assert empty.returncode == 0 and empty.stdout == ""
    assert empty.stderr == f"no jobs under {root}\n"
    none = srt("status", cwd=str(there), env=user)
    assert none.returncode == 2
    assert f"no job directories under {root}" in none.stderr

    recipe = here / "done.yaml"
    recipe.write_text(DONE)
    ran = srt("run", str(recipe), "--plain", cwd=str(here), env=user)
    assert ran.returncode == 3, ran.stderr
    (job,) = root.iterdir()
    assert not (here / "srt-jobs").exists()
    found = srt("status", cwd=str(there), env=user)
    assert found.returncode == 0, found.stderr
    assert found.stderr == f"srt status: latest job: {job}\n"
    by_name = srt("status", job.name, "--json", cwd=str(there), env=user)
    assert json.loads(by_name.stdout)["job_dir"] == str(job)
    listed = srt("ps", cwd=str(there), env=user).stdout
    assert listed.startswith("JOB") and job.name in listed
    xdg = srt("ps", cwd=str(there), env={**user, "XDG_STATE_HOME": str(tmp_path / "xdg")})
    assert xdg.stderr == f"no jobs under {tmp_path / 'xdg' / 'srt' / 'jobs'}\n"
    other = srt("status", "--root", str(there), cwd=str(here), env=user)
    assert other.returncode == 2 and f"no job directories under {there}" in other.stderr
    unknown = srt("status", "nosuch", cwd=str(there), env=user)
    assert unknown.returncode == 2
    assert f"nosuch is neither a directory nor a job under {root}" in unknown.stderr
