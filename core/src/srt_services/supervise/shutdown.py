"""The shutdown coordinator: one teardown for every way a job ends.

Tiers stop in reverse dependency order: tier 0 (benchmark, after_frontend services, the
frontend, workers), then tier 1 (before_workers services), then tier 2 (infra: etcd, NATS),
so workers deregister while the discovery plane still answers. Within a tier every process
is signalled at once (SIGTERM, then SIGCONT so a stopped process can act on it); each gets
its own grace, then SIGKILL. Processes that escaped their group are found by their job
cookie among our re-parented children and stopped with their tier. A second Ctrl-C (or
``srt stop --now``) skips the graces. At the end a sweep of every process carrying the job
cookie guarantees nothing is left, and anything that survives SIGKILL (uninterruptible
sleep) is reported, not waited for forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import TYPE_CHECKING

from srt_services.launch import process

if TYPE_CHECKING:
    from srt_services.supervise.orchestrator import InstanceRun, Orchestrator

#: How long SIGKILLed processes may take to disappear before they are reported.
KILL_WAIT = 5.0
#: Polling step for processes we cannot wait on (not our children).
STRAY_POLL = 0.02


async def _stop_instance(orch: Orchestrator, inst: InstanceRun, grace: float) -> None:
    assert orch.launcher is not None
    fut = inst.exit_fut
    if fut is None or fut.done() or inst.handle is None:
        return
    waiter = asyncio.ensure_future(asyncio.shield(fut))
    killer = asyncio.ensure_future(orch.kill_now.wait()) if orch.kill_now else None
    pending = {waiter} | ({killer} if killer else set())
    done, _ = await asyncio.wait(pending, timeout=grace, return_when=asyncio.FIRST_COMPLETED)
    if killer is not None and not killer.done():
        killer.cancel()
    if waiter in done:
        return
    reason = (
        "immediate stop requested" if killer in done else f"did not exit {grace:g}s after SIGTERM"
    )
    orch._emit(
        "escalated",
        step=inst.step,
        unit=inst.planned.unit,
        node=inst.planned.node,
        detail=f"{reason}; sending SIGKILL",
    )
    await orch.launcher.kill([inst.handle])
    await asyncio.wait({waiter}, timeout=KILL_WAIT)


def _tier_of_step(orch: Orchestrator, step: str | None) -> int | None:
    if step is None:
        return None
    inst = orch.by_step.get(step)
    return inst.unit.planned.tier if inst else None


async def _stop_strays(orch: Orchestrator, pids: list[int], grace: float) -> None:
    """Stop escaped processes (by PID and their own process group), SIGKILL after grace."""
    if not pids:
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            pgid = os.getpgid(pid)
            if pgid == pid:
                process.terminate_group(pgid)
        process.signal_pid(pid, signal.SIGTERM)
        process.signal_pid(pid, signal.SIGCONT)
    deadline = time.monotonic() + grace
    while True:
        left = [p for p in pids if process.alive(p)]
        if not left:
            return
        if time.monotonic() >= deadline or (orch.kill_now is not None and orch.kill_now.is_set()):
            break
        await asyncio.sleep(STRAY_POLL)
    orch._emit(
        "escalated",
        pids=left,
        detail="escaped processes did not exit after SIGTERM; sending SIGKILL",
    )
    for pid in left:
        process.signal_pid(pid, signal.SIGKILL)


async def _stop_tier(orch: Orchestrator, tier: int) -> None:
    assert orch.launcher is not None
    members = [i for i in orch.instances if i.unit.planned.tier == tier and i.running]
    cookie = orch.options.cookie
    strays = [
        pid
        for pid, step in orch.launcher.stray_processes(cookie).items()
        if _tier_of_step(orch, step) == tier
        and not any(i.handle and i.handle.pid == pid for i in members)
    ]
    if not members and not strays:
        return
    orch._emit("stopping_tier", tier=tier, steps=[i.step for i in members], strays=strays or None)
    for inst in members:
        inst.state = "stopping"
    if members:
        await orch.launcher.terminate([i.handle for i in members if i.handle is not None])
    kill_now = orch.kill_now is not None and orch.kill_now.is_set()
    graces = {
        i.step: 0.0
        if kill_now
        else orch.launcher.stop_budget(
            orch.options.grace_override
            if orch.options.grace_override is not None
            else i.unit.planned.stop_grace
        )
        for i in members
    }
    longest = max(graces.values(), default=0.0)
    started = time.monotonic()
    await asyncio.gather(
        *(_stop_instance(orch, i, graces[i.step]) for i in members),
        _stop_strays(orch, strays, longest),
    )
    # Killing a group can orphan more escaped processes of this tier: catch them too.
    for _ in range(5):
        more = [
            pid
            for pid, step in orch.launcher.stray_processes(cookie).items()
            if _tier_of_step(orch, step) == tier
        ]
        if not more:
            break
        remaining = max(0.0, longest - (time.monotonic() - started))
        await _stop_strays(orch, more, remaining)


async def teardown(orch: Orchestrator) -> None:
    orch.stopping = True
    orch._write_state(status="stopping")
    for inst in orch.instances:
        if inst.liveness is not None:
            inst.liveness.cancel()
    tiers = sorted({u.planned.tier for u in orch.units.values()})
    for tier in tiers:
        await _stop_tier(orch, tier)
    await _final_sweep(orch)
    orch._write_state(status="stopping")


async def _final_sweep(orch: Orchestrator) -> None:
    """Whatever still carries the job cookie (unattributed strays, late forks) dies now."""
    assert orch.launcher is not None
    cookie = orch.options.cookie
    running = {i.handle.pid for i in orch.instances if i.running and i.handle is not None}
    left = [pid for pid, _ in process.pids_with_cookie(cookie) if pid not in running]
    left += [pid for pid in orch.launcher.stray_processes(cookie) if pid not in left and pid not in running]
    if left:
        orch._emit(
            "sweep", pids=left, detail="processes left after the tiers stopped; sending SIGKILL"
        )
        for pid in left:
            process.signal_pid(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT
    while True:
        running = [i for i in orch.instances if i.running]
        remaining = [p for p in left if process.alive(p)]
        if not running and not remaining:
            return
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(STRAY_POLL)
    stuck = []
    for i in orch.instances:
        if i.running and i.handle is not None:
            stuck.append((i.handle.pid, i.step))
    stuck += [(p, None) for p in left if process.alive(p)]
    for pid, step in stuck:
        state = process.proc_state(pid) or "?"
        what = (
            "unkillable (D state: uninterruptible sleep)"
            if state == "D"
            else f"still alive (state {state})"
        )
        entry = f"pid {pid}" + (f" ({step})" if step else "") + f": {what}"
        orch.unkillable.append(entry)
        orch._emit("unkillable", pid=pid, step=step, state=state)
