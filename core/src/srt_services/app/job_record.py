"""A job directory as a plugin command reads it (``srt metrics JOBDIR``...).

Plugins must not import :mod:`srt_services.jobdir`, whose files and shapes are core's to
change; this is the stable view: what the job is, whether its orchestrator still runs, its
plan (exactly what ``srt dry-run --json`` prints), its events, and where its files are.
A directory that is no job, or a damaged file, raises ``JobDirError`` (an srt error: the
``srt`` command prints its one-line message).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from srt_services.contracts.context import JobPaths
from srt_services.contracts.plan import Plan
from srt_services.jobdir.layout import JobDirError

__all__ = ["JobDirError", "JobRecord", "read_job"]


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What a job directory says about its job, read once."""

    path: str
    job_name: str | None
    job_id: str
    #: the orchestrator still runs the job (checked by PID and start time, or the lock)
    running: bool
    #: wall times (``None``: not started yet / not ended yet)
    started: float | None
    ended: float | None
    #: ``running``, ``stopping``, ``finished``, ``failed``... (``None`` before it started)
    status: str | None
    #: ``plan.json``, read by the model that wrote it (``None`` before it was written)
    plan: Plan | None

    @property
    def paths(self) -> JobPaths:
        """Where the job's files are (the same paths a kind sees while it is planned)."""
        return JobPaths(job_dir=self.path, job_id=self.job_id)

    def events(self) -> list[dict[str, Any]]:
        """``events.jsonl``: one dict per event, each with its wall time ``t``."""
        from srt_services.jobdir.events import read_events

        return read_events(os.path.join(self.path, "events.jsonl"))


def read_job(path: str) -> JobRecord:
    """Read the job directory at ``path``; ``JobDirError`` when it is none."""
    from srt_services.jobdir.view import JobView

    view = JobView.read(path)
    plan = view.plan
    state, result = view.state, view.result
    job_id = (
        (state.job_id if state else None)
        or (plan.job_id if plan else None)
        or os.path.basename(view.job.path)
    )
    return JobRecord(
        path=view.job.path,
        job_name=(state.job_name if state else None) or (plan.job_name if plan else None),
        job_id=job_id,
        running=view.orchestrator_alive(),
        started=result.started if result else (state.orchestrator.started if state else None),
        ended=result.ended if result else None,
        status=state.status if state else None,
        plan=plan,
    )
