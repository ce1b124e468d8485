"""The "no survivors" oracle: nothing carrying a job's cookie may outlive the job.

Every process srt starts inherits ``SRT_JOB_COOKIE``; escaped daemons keep it. After a job
ended, scanning ``/proc`` for that cookie is a complete check that works whatever the
service did (double fork, ``setsid``, ``nohup``), and it never needs PIDs from the job.
Zombies are not survivors (they hold no resources and their parent reaps them).
"""

from __future__ import annotations

import signal
import time

from srt_services import procfs
from srt_services.jobdir.layout import JobDir, JobDirError
from srt_services.jobdir.state import JobState, read_state
from srt_services.launch import process


def _state(job_dir: str) -> JobState | None:
    try:
        return read_state(JobDir(job_dir))
    except JobDirError:
        return None


def cookie_of_job(job_dir: str) -> str | None:
    state = _state(job_dir)
    return state.cookie if state is not None else None


def _kill_orchestrator(job_dir: str) -> None:
    state = _state(job_dir)
    if state is None:
        return
    orch = state.orchestrator
    if procfs.same_process(orch.pid, orch.start_ticks):
        process.signal_pid(orch.pid, signal.SIGKILL)


def survivors(job_dir: str) -> list[str]:
    cookie = cookie_of_job(job_dir)
    if not cookie:
        return []
    out = []
    for pid, step in process.pids_with_cookie(cookie):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        out.append(f"pid {pid} ({step}): {cmd}")
    return out


def assert_no_survivors(job_dir: str, wait: float = 2.0) -> None:
    """Fail (after killing them, so one bad test does not poison the next) if any survive."""
    deadline = time.monotonic() + wait
    left = survivors(job_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = survivors(job_dir)
    if left:
        _kill_orchestrator(job_dir)  # first, or it restarts what we kill
        cookie = cookie_of_job(job_dir)
        if cookie:
            for pid, _ in process.pids_with_cookie(cookie):
                process.signal_pid(pid, signal.SIGKILL)
        raise AssertionError("processes of the job survived it:\n  " + "\n  ".join(left))
