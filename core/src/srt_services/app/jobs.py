"""``srt ps``'s data: the jobs under a job root, with what Slurm says of the submitted ones.

The files say everything about a local job; a Slurm job's orchestrator runs on another
host, so whether it is still pending or running is asked from Slurm (one ``squeue`` for all
the listed jobs that have not ended). How it reads as text is
:mod:`srt_services.cli.job_list_views`; ``--json`` prints this as is.
"""

from __future__ import annotations

import time
from typing import Any

from srt_services.jobdir.catalog import JobEntry, job_dirs, read_entry
from srt_services.jobdir.layout import job_root

#: How long a listing waits for Slurm (a controller that does not answer costs only this).
SLURM_TIMEOUT = 5.0


def job_rows(root: str | None = None, now: float | None = None) -> dict[str, Any]:
    base = job_root(root)
    entries = [read_entry(p) for p in job_dirs(base)]
    slurm = [e for e in entries if e.slurm_job_id is not None and not e.over]
    states: dict[str, str] | None = {}
    if slurm:
        from srt_services.launch.slurm.control import job_states

        ids = [e.slurm_job_id for e in slurm if e.slurm_job_id is not None]
        states = job_states(ids, timeout=SLURM_TIMEOUT)
    now = time.time() if now is None else now
    return {"root": base, "jobs": [_row(e, states, now) for e in entries]}


def _row(entry: JobEntry, slurm_states: dict[str, str] | None, now: float) -> dict[str, Any]:
    state = entry.state
    slurm_state = None
    if entry.slurm_job_id is not None and not entry.over and slurm_states is not None:
        slurm_state = slurm_states.get(entry.slurm_job_id)
        if slurm_state is None:
            # Slurm no longer lists it and its orchestrator wrote no result: it was
            # cancelled (or killed) before it could
            state = "lost" if entry.state != "submitted" else "cancelled"
        elif slurm_state == "PENDING":
            state = "pending"
        elif entry.state == "submitted":
            state = "starting"  # the batch script runs; its orchestrator wrote nothing yet
    duration = None
    if entry.started is not None:
        end = entry.ended if entry.ended is not None else (None if entry.over else now)
        duration = None if end is None else max(0.0, end - entry.started)
    return {
        "job_dir": entry.path,
        "job": entry.name,
        "state": state,
        "started": entry.started,
        "ended": entry.ended,
        "duration": duration,
        "exit_code": entry.exit_code,
        "nodes": entry.nodes,
        "slurm_job_id": entry.slurm_job_id,
        "slurm_state": slurm_state,
        "launcher": entry.launcher,
        "error": entry.error,
    }
