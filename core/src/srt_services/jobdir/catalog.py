"""The job directories under a root (``srt ps``), newest first, and the latest one (what
``srt status`` and ``srt logs`` use when no directory is given).

Each entry is read from the job's own files through the typed readers, so a corrupt or
half-written directory becomes one row that says what is wrong instead of breaking the
listing. What only Slurm knows (whether a submitted job is pending or still running) is
not asked here; :mod:`srt_services.app.jobs` adds it.

"Newest" is when the job started: the moment ``srt run`` wrote its plan, or ``srt apply``
its submission record (a re-run in the same directory counts as new). Ordering needs only
those files' times, so picking the latest job reads one directory, not all of them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from srt_services.jobdir.layout import PLAN, STATE, SUBMISSION, JobDirError, is_job_dir, job_root
from srt_services.jobdir.view import JobView


@dataclass(slots=True)
class JobEntry:
    path: str
    name: str | None
    #: ``running``, ``stopping``, ``succeeded``, ``failed``, ``stopped``; ``lost`` (the
    #: orchestrator is gone and left no result); ``submitted`` (a Slurm job whose
    #: orchestrator has not written anything yet); ``planned``; ``unreadable``
    state: str
    #: wall times
    started: float | None
    ended: float | None
    exit_code: int | None
    nodes: int | None
    slurm_job_id: str | None
    launcher: str | None
    #: ``unreadable``: why
    error: str | None = None

    @property
    def over(self) -> bool:
        return self.state in {"succeeded", "failed", "stopped", "lost", "unreadable"}


def started_at(path: str) -> float:
    """When the job in ``path`` started, from its files' times (0 when it has none)."""
    times = []
    for name in (PLAN, SUBMISSION, STATE):
        try:
            times.append(os.stat(os.path.join(path, name)).st_mtime)
        except OSError:
            continue
        if name != STATE:
            break  # the state file is rewritten all along: only a fallback
    return times[0] if times else 0.0


def job_dirs(root: str | None = None) -> list[str]:
    """The job directories directly under ``root`` (see :func:`job_root`), newest first."""
    base = job_root(root)
    try:
        names = os.listdir(base)
    except (FileNotFoundError, NotADirectoryError):
        return []
    paths = [os.path.join(base, n) for n in names]
    found = [p for p in paths if os.path.isdir(p) and is_job_dir(p)]
    return sorted(found, key=lambda p: (started_at(p), p), reverse=True)


def latest_job(root: str | None = None) -> str | None:
    dirs = job_dirs(root)
    return dirs[0] if dirs else None


def read_entry(path: str) -> JobEntry:
    """One job's row; never raises for a bad directory (the row says ``unreadable``)."""
    try:
        view = JobView.read(path)
    except JobDirError as exc:
        return JobEntry(
            os.path.abspath(path), None, "unreadable", None, None, None, None, None, None, str(exc)
        )
    state, result, plan, submitted = view.state, view.result, view.plan, view.submitted
    name = (
        (result.job_name if result else None)
        or (state.job_name if state else None)
        or (plan.job_name if plan else None)
    )
    started = (
        (state.orchestrator.started if state else None)
        or (submitted.submitted if submitted else None)
        or started_at(path)
        or None
    )
    nodes = len(plan.nodes) if plan is not None and plan.nodes else None
    if nodes is None and submitted is not None:
        nodes = submitted.nodes
    return JobEntry(
        path=view.job.path,
        name=name,
        state=_state_of(view),
        started=result.started if result else started,
        ended=result.ended if result else None,
        exit_code=result.exit_code if result else None,
        nodes=nodes,
        slurm_job_id=view.slurm_job_id,
        launcher=state.launcher if state else (submitted.launcher if submitted else None),
    )


def _state_of(view: JobView) -> str:
    if view.result is not None:
        return view.result.status
    state = view.state
    if state is None:
        return "submitted" if view.submitted is not None else "planned"
    if state.finished:
        return {"finished": "succeeded"}.get(state.status, state.status)
    if view.slurm_job_id is not None:
        return state.status  # the orchestrator runs on a batch node: Slurm decides
    # (on another host, whether it lives is told by the job directory's lock)
    return state.status if view.orchestrator_alive() else "lost"
