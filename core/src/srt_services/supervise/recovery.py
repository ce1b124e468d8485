"""Acting on a job directory from another process: stop, and leftovers.

The job directory's ``state.json`` names the orchestrator (PID plus start time, host, PID
namespace and boot) and records how to find the job's processes: the cookie, the cgroup,
every session srt created, each instance's PID with its start time. If the orchestrator
lives, ``srt stop`` asks it to stop (SIGTERM) and waits; it alone knows the tiers and
graces. If it died (SIGKILL, OOM, a crashed node), its leftovers are found through all of
those (:mod:`srt_services.launch.jobprocs`), so a descendant that scrubbed its environment
is found too, and stopped tier by tier from here: SIGTERM to each process group, SIGKILL
after the grace, then rescans until nothing is left. Every signal goes through
:func:`srt_services.procfs.signal_same` (a pidfd, checked against the start time seen), so a
PID that was reused meanwhile is never hit. "nothing of the job is running" is printed only
after a last scan found nothing.

From another host, another PID namespace or after a reboot the recorded PIDs name nothing
here; ``srt stop`` says so and signals nothing.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable, Iterable

from srt_services import procfs
from srt_services.jobdir.planview import DEFAULT_GRACE
from srt_services.jobdir.state import write_state
from srt_services.jobdir.stop_request import write_stop_request
from srt_services.jobdir.view import JobView
from srt_services.launch import jobprocs
from srt_services.launch.cgroup import JobCgroup

Log = Callable[[str], object]

#: How long SIGKILLed leftovers may take to disappear before they are reported.
KILL_WAIT = 5.0
#: What ``srt stop`` adds to the longest grace before it stops waiting for the orchestrator.
ORCHESTRATOR_MARGIN = 15.0
#: The longest grace ``srt stop`` honours from a plan (a corrupt plan may say 1e308).
MAX_GRACE = 3600.0
POLL = 0.02


@dataclasses.dataclass(frozen=True, slots=True)
class Leftover:
    pid: int
    step: str | None
    ticks: int


def leftovers(view: JobView) -> list[Leftover]:
    """Live processes of the job (the orchestrator itself excluded), however they are found."""
    state = view.state
    if state is None or not state.cookie or state.orchestrator.elsewhere() is not None:
        return []
    known: dict[int, str | None] = {}
    group = JobCgroup.existing(state.cgroup, state.cookie)
    if group is not None:
        known = group.members()
    sessions: dict[int, str | None] = {s.sid: s.step for s in state.sessions}
    roots = []
    leaders: dict[int, int | None] = {}
    for name, inst in [*state.instances.items(), *state.builds.items()]:
        if inst.pgid is not None:
            sessions.setdefault(inst.pgid, name)
        if inst.pid is not None:
            leaders[inst.pid] = inst.start_ticks
            if procfs.same_process(inst.pid, inst.start_ticks):
                roots.append(inst.pid)
                known.setdefault(inst.pid, name)
    found = jobprocs.find(
        state.cookie,
        sessions={sid: step for sid, step in sessions.items() if _ours(sid, leaders)},
        roots=roots,
        not_before=view.not_before_ticks(),
        known=known,
    )
    orch = state.orchestrator
    out = []
    for pid, step in found.items():
        if pid == orch.pid and procfs.same_process(pid, orch.start_ticks):
            continue
        ticks = procfs.start_ticks(pid)
        if ticks is not None:
            out.append(Leftover(pid, step, ticks))
    return out


def _ours(sid: int, leaders: dict[int, int | None]) -> bool:
    """Whether the session (or group) ``sid`` that state.json names can still be the one srt
    created. Its id is its leader's PID, which the kernel does not hand out again while the
    session has a member; so if a process with that PID lives, it must be the leader srt
    started (its start time, where recorded, says so), else the id was reused by a stranger
    after the job's session ended, and nothing in that session is the job's."""
    holder = procfs.start_ticks(sid)
    if holder is None:
        return True  # the leader is gone: whoever is left in the session is the job's
    return leaders.get(sid) == holder


def _signal(found: Iterable[Leftover], sig: int) -> None:
    """``sig`` to each leftover's process group and to itself, checked by start time."""
    mine = os.getpgrp()
    groups: set[int] = set()
    for left in found:
        ids = procfs.stat_ids(left.pid)
        if ids is None or ids[3] != left.ticks:
            continue
        pgid = ids[1]
        # a group's id is its leader's PID, never reused while the group exists, and a
        # group lives inside one session, which the job created: all of it is the job's
        if pgid != mine and pgid not in groups and procfs.signal_same(left.pid, left.ticks, 0):
            groups.add(pgid)
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
        procfs.signal_same(left.pid, left.ticks, sig)


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    """Wait until ``pids`` are gone, at most ``timeout`` seconds; return those still alive."""
    deadline = time.monotonic() + timeout
    left = [p for p in pids if procfs.alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(POLL)
        left = [p for p in left if procfs.alive(p)]
    return left


def _grace(value: float) -> float:
    return min(value, MAX_GRACE) if math.isfinite(value) and value >= 0 else DEFAULT_GRACE


def stop_leftovers(view: JobView, grace: float | None = None, log: Log = print) -> list[str]:
    """Stop every process of a job whose orchestrator is gone; return what survived."""
    found = leftovers(view)
    if not found:
        return []
    tiers = view.tiers()
    graces = view.grace()
    by_tier: dict[int, list[Leftover]] = {}
    for left in found:
        by_tier.setdefault(tiers.get(left.step or "", 0), []).append(left)
    for tier in sorted(by_tier):
        members = by_tier[tier]
        wait = grace
        if wait is None:
            wait = max(_grace(graces.get(m.step or "", DEFAULT_GRACE)) for m in members)
        _stop_leftover_tier(view, tier, members, wait, log)
    return _chase(view, log)


def _stop_leftover_tier(
    view: JobView, tier: int, members: list[Leftover], wait: float, log: Log
) -> None:
    """SIGTERM the tier's leftovers (their whole groups), SIGKILL them after ``wait``."""
    log(f"stopping tier {tier}: " + ", ".join(f"{m.step or '?'} (pid {m.pid})" for m in members))
    _signal(members, signal.SIGTERM)
    _signal(members, signal.SIGCONT)
    left = set(wait_gone([m.pid for m in members], wait))
    late = [m for m in members if m.pid in left]
    if late:
        for m in late:
            log(f"pid {m.pid} did not exit {wait:g}s after SIGTERM; sending SIGKILL")
        _signal(late, signal.SIGKILL)
    group = JobCgroup.existing(view.state.cgroup if view.state else None, view.cookie)
    if group is not None:
        for step in {m.step for m in members if m.step}:
            group.kill(step)
    wait_gone([m.pid for m in late], KILL_WAIT)


def _chase(view: JobView, log: Log) -> list[str]:
    """Rescan and SIGKILL (the graces are over) until nothing is found or the budget ends."""
    deadline = time.monotonic() + KILL_WAIT
    group = JobCgroup.existing(view.state.cgroup if view.state else None, view.cookie)
    while True:
        found = leftovers(view)
        if not found:
            return []
        if time.monotonic() >= deadline:
            return [
                f"pid {f.pid}{f' ({f.step})' if f.step else ''} (state {procfs.proc_state(f.pid)})"
                for f in found
            ]
        log("stopping what the first pass orphaned: " + ", ".join(str(f.pid) for f in found))
        _signal(found, signal.SIGKILL)
        if group is not None:
            group.kill()
        wait_gone([f.pid for f in found], 1.0)


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
    assert view.state is not None
    orch = view.state.orchestrator
    log(f"asking the orchestrator (pid {orch.pid}) to stop the job")
    procfs.signal_same(orch.pid, orch.start_ticks, signal.SIGTERM)
    if now:
        time.sleep(0.05)
        procfs.signal_same(orch.pid, orch.start_ticks, signal.SIGTERM)
    grace = max((_grace(g) for g in view.grace().values()), default=DEFAULT_GRACE)
    limit = timeout if timeout is not None else grace + ORCHESTRATOR_MARGIN
    if wait_gone([orch.pid], limit):
        log(f"the orchestrator did not finish within {limit:g}s; stopping its processes directly")
        return False
    return True


def _remove_cgroup(view: JobView) -> None:
    group = JobCgroup.existing(view.state.cgroup if view.state else None, view.cookie)
    if group is not None:
        group.remove(wait=0.5)


def stop_job(path: str, now: bool = False, timeout: float | None = None, log: Log = print) -> int:
    """``srt stop``: returns 0 when nothing of the job is left running."""
    view = JobView.read(path)
    if view.slurm_job_id is not None:
        if view.result is None:
            write_stop_request(view.job, view.cookie, now)
        return _stop_slurm_job(view.slurm_job_id, now, timeout, log)
    elsewhere = view.state.orchestrator.elsewhere() if view.state is not None else None
    if elsewhere is not None:
        return _orchestrator_elsewhere(view, elsewhere, log)
    alive = view.orchestrator_alive()
    if alive:
        # read by the orchestrator when the signal arrives: the job ends as stopped by us
        write_stop_request(view.job, view.cookie, now)
    if alive and _ask_orchestrator(view, now, timeout, log):
        view = JobView.read(path)
        if not leftovers(view):
            _remove_cgroup(view)
            log("stopped")
            return 0
    return _stop_directly(view, now, timeout, log)


def _orchestrator_elsewhere(view: JobView, elsewhere: str, log: Log) -> int:
    """The job's orchestrator is out of this process's sight (``elsewhere`` says why): after
    a reboot nothing of the job can run, so it is only marked stopped; on another host or
    in another PID namespace only an ``srt stop`` run there can reach it."""
    assert view.state is not None
    orch = view.state.orchestrator
    if "rebooted" in elsewhere:
        log(f"the job's orchestrator (pid {orch.pid}) cannot be running: {elsewhere}")
        if not view.state.finished:
            mark_stopped(view, "srt stop (after a reboot)")
        return 0
    log(
        f"cannot stop this job from here: its orchestrator (pid {orch.pid}) {elsewhere};"
        " run `srt stop` there"
    )
    return 1


def _stop_directly(view: JobView, now: bool, timeout: float | None, log: Log) -> int:
    """Stop what is left of the job without its orchestrator (gone, or too slow); 0 when
    nothing of the job is left running."""
    survivors = stop_leftovers(view, 0.0 if now else timeout, log)
    if view.state is not None and not view.orchestrator_alive():
        mark_stopped(view, "srt stop")
    left = leftovers(view)
    if survivors or left:
        shown = survivors or [f"pid {f.pid} ({f.step or '?'})" for f in left]
        log("could not stop: " + ", ".join(shown))
        return 1
    _remove_cgroup(view)
    log("nothing of the job is running")
    return 0
