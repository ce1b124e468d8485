"""The "no survivors" oracle: nothing carrying a job's cookie may outlive the job.

Every process srt starts inherits ``SRT_JOB_COOKIE``; escaped daemons keep it. After a job
ended, scanning ``/proc`` for that cookie is a complete check that works whatever the
service did (double fork, ``setsid``, ``nohup``), and it never needs PIDs from the job.
Zombies are not survivors (they hold no resources and their parent reaps them).
"""

from __future__ import annotations

import json
import os
import signal
import time

from srt_services.launch import process


def cookie_of_job(job_dir: str) -> str | None:
    try:
        with open(os.path.join(job_dir, "state.json"), "rb") as fh:
            cookie = json.loads(fh.read()).get("cookie")
    except (OSError, ValueError):
        return None
    return cookie if isinstance(cookie, str) else None


def _kill_orchestrator(job_dir: str) -> None:
    try:
        with open(os.path.join(job_dir, "state.json"), "rb") as fh:
            orch = json.loads(fh.read()).get("orchestrator") or {}
    except (OSError, ValueError):
        return
    pid, ticks = orch.get("pid"), orch.get("start_ticks")
    if isinstance(pid, int) and process.alive(pid) and process.start_ticks(pid) == ticks:
        process.signal_pid(pid, signal.SIGKILL)


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
