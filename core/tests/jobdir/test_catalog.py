"""The job catalog on hand-made job directories: order, the latest job, and what a state
file says when its orchestrator cannot be seen from here."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from srt_services.jobdir.catalog import job_dirs, latest_job, read_entry
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.lock import JobLock
from srt_services.jobdir.state import VERSION, JobState, OrchestratorInfo, write_state
from srt_services.testing import kit


def _job(root: Path, name: str, host: str, started_ago: float) -> Path:
    path = root / name
    path.mkdir(parents=True)
    # a PID no process has: pid_max is at most 2^22
    orch = OrchestratorInfo((1 << 22) - 1, 12345, host, time.time() - started_ago)
    state = JobState(
        VERSION, name, name, "c" * 32, "local", "running", "serving", orch, {}, None, []
    )
    write_state(JobDir(str(path)), state)
    # a real plan (the one plan schema): job ``name`` on two nodes
    recipe = {
        "name": name,
        "observability": {"metrics": False},
        "services": [{"name": "a", "command": ["x"], "nodes": 2}],
    }
    (path / "plan.json").write_bytes(kit.plan(kit.isolated_plugins(), recipe).to_json())
    t = time.time() - started_ago
    os.utime(path / "plan.json", (t, t))
    return path


def test_newest_first_and_the_latest(tmp_path: Path) -> None:
    here = socket.gethostname()
    old = _job(tmp_path, "old", here, 100)
    new = _job(tmp_path, "new", here, 10)
    (tmp_path / "not-a-job").mkdir()
    (tmp_path / "a-file").write_text("")
    assert job_dirs(str(tmp_path)) == [str(new), str(old)]
    assert latest_job(str(tmp_path)) == str(new)
    assert job_dirs(str(tmp_path / "missing")) == []


def test_a_dead_orchestrator_here_and_one_on_another_host(tmp_path: Path) -> None:
    dead = read_entry(str(_job(tmp_path, "here", socket.gethostname(), 5)))
    assert dead.state == "lost" and dead.nodes == 2 and dead.name == "here"
    # another host's PID means nothing here: its job directory's lock tells
    there = _job(tmp_path, "there", "another-host", 5)
    assert read_entry(str(there)).state == "lost"
    lock = JobLock(str(there))
    lock.acquire()
    try:
        elsewhere = read_entry(str(there))
    finally:
        lock.release()
    assert elsewhere.state == "running"
    assert elsewhere.started is not None and time.time() - elsewhere.started < 60
