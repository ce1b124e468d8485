"""Talking to Slurm about a submitted job from outside it (``srt status``/``srt stop``)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from srt_services.launch.slurm.batchhost import slurm_env

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def _out(argv: list[str], timeout: float = 30.0) -> tuple[int, str]:
    try:
        p = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return p.returncode, p.stdout


def job_state(job_id: str) -> str | None:
    """The job's state (RUNNING, PENDING...), or ``None`` once Slurm no longer lists it."""
    code, out = _out(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if code != 0:
        return None
    state = out.strip().splitlines()
    return state[0].strip() if state else None


def job_states(job_ids: list[str], timeout: float = 30.0) -> dict[str, str] | None:
    """job id -> state of each of ``job_ids`` Slurm still lists (one ``squeue`` for all);
    ``None`` when Slurm cannot be asked (no ``squeue`` here, no controller within
    ``timeout``)."""
    if not job_ids:
        return {}
    argv = ["squeue", "-h", "-o", "%i %T", "-j", ",".join(job_ids)]
    try:
        p = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, env=slurm_env(), check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        if "invalid job id" not in p.stderr.lower():
            return None
        # squeue refuses the whole list when it no longer knows one id: one at a time
        found: dict[str, str] = {}
        for job_id in job_ids:
            state = job_state(job_id)
            if state is not None:
                found[job_id] = state
        return found
    found = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            found[parts[0]] = parts[1]
    return found


def steps(job_id: str) -> dict[str, str]:
    """step name -> step id of the job's running steps."""
    code, out = _out(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"])
    found: dict[str, str] = {}
    if code != 0:
        return found
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            found.setdefault(parts[1].strip(), parts[0])
    return found


def stop(
    job_id: str, timeout: float, now: bool = False, log: Callable[[str], object] = print
) -> bool:
    """Ask the orchestrator (the batch shell) to stop the job in order; cancel it if it does
    not end in time. Returns True when the job is gone."""
    state = job_state(job_id)
    if state is None or state not in ACTIVE:
        return True
    if state == "PENDING" or now:
        _out(["scancel", job_id])
    else:
        _out(["scancel", "--signal=TERM", "--batch", job_id])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = job_state(job_id)
        if state is None or state not in ACTIVE or state == "COMPLETING":
            return True
        time.sleep(0.2)
    log(f"job {job_id} did not end within {timeout:g}s; cancelling it")
    _out(["scancel", job_id])
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        state = job_state(job_id)
        if state is None or state not in ACTIVE:
            return True
        time.sleep(0.2)
    return False
