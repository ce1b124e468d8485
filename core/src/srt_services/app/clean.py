"""``srt rm`` and ``srt prune``: job directories removed once nothing of their job runs.

A directory is removed only when it is a job directory (it holds a state, a plan or a
Slurm submission record: ``srt rm ~`` is refused) and its job is over: no live
orchestrator, no process of the job found by its cookie, cgroup or sessions, no Slurm job
still active. ``--force`` (``srt rm`` only) first stops a job that still runs, exactly as
``srt stop`` does (graces, then SIGKILL), and removes it when nothing of it is left.
``srt prune`` never stops anything: a job still running is skipped and named.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from srt_services.jobdir.layout import JobDirError
from srt_services.jobdir.view import JobView

Log = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Removed:
    job_dir: str
    ok: bool
    #: why it was not removed (or what was done first)
    text: str


@dataclass(slots=True)
class Pruned:
    removed: list[str] = field(default_factory=list)
    #: (job directory, why it was kept)
    kept: list[tuple[str, str]] = field(default_factory=list)


def still_running(view: JobView) -> str | None:
    """Why the job counts as running, or ``None`` when nothing of it runs."""
    if view.slurm_job_id is not None and view.result is None:
        from srt_services.launch.slurm.control import ACTIVE, job_state

        slurm = job_state(view.slurm_job_id)
        if slurm in ACTIVE:
            return f"Slurm job {view.slurm_job_id} is {slurm.lower()}"
    if view.state is not None:
        elsewhere = view.state.orchestrator.elsewhere()
        if elsewhere is not None and "rebooted" not in elsewhere and not view.state.finished:
            return f"its orchestrator (pid {view.state.orchestrator.pid}) {elsewhere}"
        if view.orchestrator_alive():
            return f"its orchestrator (pid {view.state.orchestrator.pid}) is running"
        from srt_services.supervise.recovery import leftovers

        left = leftovers(view)
        if left:
            shown = ", ".join(f"pid {f.pid} ({f.step or '?'})" for f in left[:5])
            return f"processes of it still run ({shown})"
    return None


def remove(job_dir: str, force: bool = False, log: Log = print) -> Removed:
    """Remove one job directory (see the module's rules)."""
    path = os.path.abspath(job_dir)
    try:
        view = JobView.read(path)
    except JobDirError as exc:
        return Removed(path, False, str(exc))
    running = still_running(view)
    if running is not None:
        if not force:
            return Removed(path, False, f"{running}: `srt stop` it first, or --force")
        from srt_services.app.stop import StopRequest, stop_job

        log(f"{running}: stopping it")
        if stop_job(StopRequest(path), log) != 0:
            return Removed(path, False, "it could not be stopped, so it was not removed")
        again = still_running(JobView.read(path))
        if again is not None:
            return Removed(path, False, f"{again}: not removed")
    left = _remove_network(view)
    if left:
        return Removed(path, False, f"its network could not be removed ({'; '.join(left)})")
    try:
        shutil.rmtree(path)
    except OSError as exc:
        return Removed(path, False, f"cannot remove it: {exc.strerror} ({exc.filename})")
    return Removed(path, True, "removed")


def _remove_network(view: JobView) -> list[str]:
    """The namespaces and bridge a killed orchestrator left (the plan names them; nothing
    else is touched); what could not be removed."""
    from srt_services.launch import netns

    return netns.remove(view.plan.local_network if view.plan is not None else None)


def prune(
    root: str | None, older_than: float, dry_run: bool = False, now: float | None = None
) -> Pruned:
    """Remove the job directories under ``root`` that ended (or, never having ended, were
    started) more than ``older_than`` seconds ago, and whose job runs no more."""
    from srt_services.jobdir.catalog import job_dirs, read_entry

    now = time.time() if now is None else now
    out = Pruned()
    for path in job_dirs(root):
        entry = read_entry(path)
        when = entry.ended or entry.started or os.stat(path).st_mtime
        if now - when < older_than:
            continue
        try:
            running = still_running(JobView.read(path))
        except JobDirError as exc:
            out.kept.append((path, str(exc)))
            continue
        if running is not None:
            out.kept.append((path, running))
            continue
        if dry_run:
            out.removed.append(path)
            continue
        done = remove(path)
        if done.ok:
            out.removed.append(path)
        else:
            out.kept.append((path, done.text))
    return out
