"""A job's leftovers after its orchestrator died: finding them, and stopping them tier by
tier as the orchestrator would have (``srt stop`` on a dead job, a new ``srt run`` taking
over its directory).

The job directory's ``state.json`` names the orchestrator (PID plus start time, host, PID
namespace and boot) and records how to find the job's processes: the cookie, the cgroup,
every session srt created, each instance's PID with its start time. If the orchestrator
died (SIGKILL, OOM, a crashed node), its leftovers are found through all of those
(:mod:`srt_services.launch.jobprocs`), so a descendant that scrubbed its environment is
found too, and stopped tier by tier: SIGTERM to each process group, SIGKILL after the
grace, then rescans until nothing is left. Every signal goes through
:func:`srt_services.procfs.signal_same` (a pidfd, checked against the start time seen), so
a PID that was reused meanwhile is never hit.
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time
from collections.abc import Callable, Iterable

from srt_services import procfs
from srt_services.jobdir.view import JobView
from srt_services.launch import jobprocs
from srt_services.launch.cgroup import JobCgroup

Log = Callable[[str], object]

#: The grace a step gets when its plan does not say (the recipe's default).
DEFAULT_GRACE = 30.0
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


def grace_of(value: float) -> float:
    """A plan's grace, bounded (a corrupt plan may say 1e308 or -1)."""
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
            wait = max(grace_of(graces.get(m.step or "", DEFAULT_GRACE)) for m in members)
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
