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


def _tier_of_step(orch: Orchestrator, step: str | None) -> int | None:
    if step is None:
        return None
    inst = orch.by_step.get(step)
    return inst.unit.planned.tier if inst else None


def _term_strays(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                process.terminate_group(pid)
        process.signal_pid(pid, signal.SIGTERM)
        process.signal_pid(pid, signal.SIGCONT)


async def _wait_until(
    orch: Orchestrator, futures: set[asyncio.Future[int]], deadline: float
) -> bool:
    """Wait for ``futures`` until ``deadline`` (loop time); True if an immediate kill was asked."""
    assert orch.kill_now is not None
    loop = asyncio.get_running_loop()
    pending = {f for f in futures if not f.done()}
    if not pending:
        return orch.kill_now.is_set()
    killer = asyncio.ensure_future(orch.kill_now.wait())
    try:
        await asyncio.wait(
            pending | {killer},
            timeout=max(0.0, deadline - loop.time()),
            return_when=asyncio.FIRST_COMPLETED,
        )
        while not killer.done() and any(not f.done() for f in pending) and loop.time() < deadline:
            pending = {f for f in pending if not f.done()}
            await asyncio.wait(
                pending | {killer},
                timeout=max(0.0, deadline - loop.time()),
                return_when=asyncio.FIRST_COMPLETED,
            )
    finally:
        if not killer.done():
            killer.cancel()
    return orch.kill_now.is_set()


async def _stop_tier(orch: Orchestrator, tier: int) -> None:
    """Signal the whole tier at once, then wait: one deadline per grace value, one SIGKILL
    batch per deadline (so 200 instances cost one wait, not 200 timers)."""
    assert orch.launcher is not None
    assert orch.kill_now is not None
    loop = asyncio.get_running_loop()
    members = [i for i in orch.instances if i.unit.planned.tier == tier and i.running]
    handles = [i.handle for i in members if i.handle is not None]
    if handles:
        await orch.launcher.terminate(handles)
    member_pids = {h.pid for h in handles}
    cookie = orch.options.cookie
    strays = [
        pid
        for pid, step in orch.launcher.stray_processes(cookie).items()
        if pid not in member_pids and _tier_of_step(orch, step) == tier
    ]
    _term_strays(strays)
    if not members and not strays:
        return
    orch._emit("stopping_tier", tier=tier, steps=[i.step for i in members], strays=strays or None)
    for inst in members:
        inst.state = "stopping"
    override = orch.options.grace_override
    started = loop.time()
    by_grace: dict[float, list[InstanceRun]] = {}
    for inst in members:
        wanted = override if override is not None else inst.unit.planned.stop_grace
        by_grace.setdefault(orch.launcher.stop_budget(wanted), []).append(inst)
    longest = max(by_grace, default=0.0)
    for grace in sorted(by_grace):
        group = by_grace[grace]
        futures = {i.exit_fut for i in group if i.exit_fut is not None}
        immediate = await _wait_until(orch, futures, started + grace)
        late = [i for i in group if i.running]
        if late:
            reason = (
                "immediate stop requested"
                if immediate
                else f"did not exit {grace:g}s after SIGTERM"
            )
            for inst in late:
                orch._emit(
                    "escalated",
                    step=inst.step,
                    unit=inst.planned.unit,
                    node=inst.planned.node,
                    detail=f"{reason}; sending SIGKILL",
                )
            await orch.launcher.kill([i.handle for i in late if i.handle is not None])
    # Wait for the SIGKILLed, and for escaped processes (more may appear as groups die).
    await _wait_until(
        orch, {i.exit_fut for i in members if i.exit_fut is not None}, loop.time() + KILL_WAIT
    )
    for _ in range(5):
        more = [
            pid
            for pid, step in orch.launcher.stray_processes(cookie).items()
            if _tier_of_step(orch, step) == tier
        ]
        if not more:
            return
        _term_strays([p for p in more if p not in strays])
        strays = list(dict.fromkeys([*strays, *more]))
        deadline = max(started + longest, loop.time())
        while loop.time() < deadline and not orch.kill_now.is_set():
            if not any(process.alive(p) for p in more):
                break
            await asyncio.sleep(STRAY_POLL)
        left = [p for p in more if process.alive(p)]
        if left:
            orch._emit(
                "escalated",
                pids=left,
                detail="escaped processes did not exit after SIGTERM; sending SIGKILL",
            )
            for pid in left:
                process.signal_pid(pid, signal.SIGKILL)


async def teardown(orch: Orchestrator) -> None:
    orch.stopping = True
    for inst in orch.instances:
        if inst.liveness is not None:
            inst.liveness.cancel()
    tiers = sorted({u.planned.tier for u in orch.units.values()})
    for tier in tiers:
        await _stop_tier(orch, tier)
    await _final_sweep(orch)
    orch._write_state(status="stopping")


async def _final_sweep(orch: Orchestrator) -> None:
    """Whatever of the job is still around (unattributed strays, late forks) dies now."""
    assert orch.launcher is not None
    cookie = orch.options.cookie
    running = {i.handle.pid for i in orch.instances if i.running and i.handle is not None}
    # As a child subreaper every process the job started is our descendant: our children
    # are the complete list (srt stop's recovery path scans /proc by cookie instead).
    left = [pid for pid in orch.launcher.stray_processes(cookie) if pid not in running]
    if left:
        orch._emit(
            "sweep", pids=left, detail="processes left after the tiers stopped; sending SIGKILL"
        )
        for pid in left:
            process.signal_pid(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT
    while True:
        busy = [i for i in orch.instances if i.running]
        remaining = [p for p in left if process.alive(p)]
        if not busy and not remaining:
            return
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(STRAY_POLL)
    stuck: list[tuple[int, str | None]] = []
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
