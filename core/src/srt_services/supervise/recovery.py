"""Acting on a job directory from another process: stop, and leftovers.

The job directory's ``state.json`` names the orchestrator (PID plus start time) and the
job's cookie. If the orchestrator lives, ``srt stop`` asks it to stop (SIGTERM) and waits;
it alone knows the tiers and graces. If it died (SIGKILL, OOM, a crashed node), its
leftovers are found by cookie, confirmed by start time (never by PID alone: PIDs are
reused), and stopped tier by tier from here.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable

from srt_services.jobdir.planview import DEFAULT_GRACE
from srt_services.jobdir.state import write_state
from srt_services.jobdir.stop_request import write_stop_request
from srt_services.jobdir.view import JobView
from srt_services.launch import process

Log = Callable[[str], object]

#: How long SIGKILLed leftovers may take to disappear before they are reported.
KILL_WAIT = 5.0
#: What ``srt stop`` adds to the longest grace before it stops waiting for the orchestrator.
ORCHESTRATOR_MARGIN = 15.0


def leftovers(view: JobView) -> list[tuple[int, str | None]]:
    """Live processes carrying the job's cookie that started no earlier than the job."""
    if not view.cookie:
        return []
    return process.pids_with_cookie(view.cookie, view.not_before_ticks())


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until ``pids`` are gone, at most ``timeout`` seconds; return those still alive."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if process.alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if process.alive(p)]
    return left


def stop_leftovers(view: JobView, grace: float | None = None, log: Log = print) -> list[str]:
    """Stop every process of a job whose orchestrator is gone; return what survived."""
    found = leftovers(view)
    if not found:
        return []
    tiers = view.tiers()
    by_tier: dict[int, list[tuple[int, str | None]]] = {}
    for pid, step in found:
        by_tier.setdefault(tiers.get(step or "", 0), []).append((pid, step))
    graces = view.grace()
    survivors: list[str] = []
    for tier in sorted(by_tier):
        members = by_tier[tier]
        wait = grace
        if wait is None:
            wait = max(graces.get(s or "", DEFAULT_GRACE) for _, s in members)
        survivors += _stop_leftover_tier(tier, members, wait, log)
    return survivors


def _stop_leftover_tier(
    tier: int, members: list[tuple[int, str | None]], wait: float, log: Log
) -> list[str]:
    """SIGTERM the tier's leftovers, SIGKILL them after ``wait``; return what survived."""
    log(f"stopping tier {tier}: " + ", ".join(f"{s or '?'} (pid {p})" for p, s in members))
    for pid, _ in members:
        process.signal_pid(pid, signal.SIGTERM)
        process.signal_pid(pid, signal.SIGCONT)
    left = wait_gone([p for p, _ in members], wait)
    for pid in left:
        log(f"pid {pid} did not exit {wait:g}s after SIGTERM; sending SIGKILL")
        process.signal_pid(pid, signal.SIGKILL)
    return [f"pid {pid} (state {process.proc_state(pid)})" for pid in wait_gone(left, KILL_WAIT)]


def mark_stopped(view: JobView, note: str) -> None:
    """Record in ``state.json`` that the job was stopped from outside (and by what)."""
    if view.state is None:
        return
    stopped = dataclasses.replace(view.state, status="stopped", stopped_by=note)
    write_state(view.job, stopped)


def _stop_slurm_job(job_id: str, now: bool, timeout: float | None, log: Log) -> int:
    from srt_services.launch.slurm import control

    log(f"stopping Slurm job {job_id}")
    gone = control.stop(job_id, timeout if timeout is not None else 60.0, now=now, log=log)
    if not gone:
        log(f"Slurm job {job_id} is still listed after scancel")
        return 1
    log("nothing of the job is running")
    return 0


def _ask_orchestrator(view: JobView, now: bool, timeout: float | None, log: Log) -> bool:
    """SIGTERM the live orchestrator (twice with ``now``) and wait; True once it is gone."""
    pid = view.orchestrator_pid
    assert pid is not None
    log(f"asking the orchestrator (pid {pid}) to stop the job")
    process.signal_pid(pid, signal.SIGTERM)
    if now:
        time.sleep(0.05)
        process.signal_pid(pid, signal.SIGTERM)
    grace = max(view.grace().values(), default=DEFAULT_GRACE)
    limit = timeout if timeout is not None else grace + ORCHESTRATOR_MARGIN
    if wait_gone([pid], limit):
        log(f"the orchestrator did not finish within {limit:g}s; stopping its processes directly")
        return False
    return True


def stop_job(path: str, now: bool = False, timeout: float | None = None, log: Log = print) -> int:
    """``srt stop``: returns 0 when nothing of the job is left running."""
    view = JobView.read(path)
    if view.slurm_job_id is not None:
        if view.result is None:
            write_stop_request(view.job, view.cookie, now)
        return _stop_slurm_job(view.slurm_job_id, now, timeout, log)
    alive = view.orchestrator_alive()
    if alive:
        # read by the orchestrator when the signal arrives: the job ends as stopped by us
        write_stop_request(view.job, view.cookie, now)
    if alive and _ask_orchestrator(view, now, timeout, log):
        view = JobView.read(path)
        if not leftovers(view):
            log("stopped")
            return 0
    survivors = stop_leftovers(view, 0.0 if now else timeout, log)
    if view.state is not None and not view.orchestrator_alive():
        mark_stopped(view, "srt stop")
    if survivors:
        log("could not stop: " + ", ".join(survivors))
        return 1
    log("nothing of the job is running")
    return 0
