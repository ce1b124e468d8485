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

The coordinator is handed what it acts on (:class:`Shutdown`): the instances, the
launcher, the cookie, the "kill now" event and the event writer. It never sees the
orchestrator, so the orchestrator can call it without either importing the other's
internals.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.launch import process
from srt_services.supervise.runs import Emit, InstanceRun

if TYPE_CHECKING:
    from srt_services.extend.launcher import Launcher

#: How long SIGKILLed processes may take to disappear before they are reported.
KILL_WAIT = 5.0
#: Polling step for processes we cannot wait on (not our children).
STRAY_POLL = 0.02
#: Rescans for escaped processes per tier (more may appear as process groups die).
STRAY_ROUNDS = 5


def _term_strays(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid:
                process.terminate_group(pid)
        process.signal_pid(pid, signal.SIGTERM)
        process.signal_pid(pid, signal.SIGCONT)


async def _wait_until(
    futures: set[asyncio.Future[int]], deadline: float, kill_now: asyncio.Event
) -> bool:
    """Wait for ``futures`` until ``deadline`` (loop time); True if an immediate kill was asked."""
    loop = asyncio.get_running_loop()
    pending = {f for f in futures if not f.done()}
    if not pending:
        return kill_now.is_set()
    killer = asyncio.ensure_future(kill_now.wait())
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
    return kill_now.is_set()


def _exits(members: Sequence[InstanceRun]) -> set[asyncio.Future[int]]:
    return {i.exit_fut for i in members if i.exit_fut is not None}


@dataclass
class Shutdown:
    """Stops every instance of a job, tier by tier; :meth:`run` is the whole teardown."""

    instances: Sequence[InstanceRun]
    launcher: Launcher
    cookie: str
    #: set by a second signal (or ``srt stop --now``): skip what is left of the graces
    kill_now: asyncio.Event
    emit: Emit
    #: ``srt run --grace``: one grace for every instance instead of the plan's
    grace_override: float | None = None
    #: what survived SIGKILL, one sentence per process (filled by :meth:`run`)
    unkillable: list[str] = field(default_factory=list)
    _tier_of: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._tier_of = {i.step: i.unit.planned.tier for i in self.instances}

    async def run(self) -> list[str]:
        """Stop every tier, then sweep; return what could not be killed."""
        for tier in sorted(set(self._tier_of.values())):
            await self._stop_tier(tier)
        await self._final_sweep()
        return self.unkillable

    # ------------------------------------------------------------------ one tier

    def _strays_of(self, tier: int, skip: set[int] | None = None) -> list[int]:
        """Escaped processes attributed (by their cookie's step) to ``tier``."""
        return [
            pid
            for pid, step in self.launcher.stray_processes(self.cookie).items()
            if (skip is None or pid not in skip)
            and step is not None
            and self._tier_of.get(step) == tier
        ]

    async def _stop_tier(self, tier: int) -> None:
        """Signal the whole tier at once, then wait: one deadline per grace value, one SIGKILL
        batch per deadline (so 200 instances cost one wait, not 200 timers)."""
        loop = asyncio.get_running_loop()
        members = [i for i in self.instances if i.unit.planned.tier == tier and i.running]
        handles = [i.handle for i in members if i.handle is not None]
        if handles:
            await self.launcher.terminate(handles)
        strays = self._strays_of(tier, skip={h.pid for h in handles})
        _term_strays(strays)
        if not members and not strays:
            return
        self.emit(
            "stopping_tier", tier=tier, steps=[i.step for i in members], strays=strays or None
        )
        for inst in members:
            inst.state = "stopping"
        started = loop.time()
        longest = await self._escalate_per_grace(members, started)
        # Wait for the SIGKILLed, and for escaped processes (more may appear as groups die).
        await _wait_until(_exits(members), loop.time() + KILL_WAIT, self.kill_now)
        await self._chase_strays(tier, strays, started + longest)

    def _by_grace(self, members: list[InstanceRun]) -> dict[float, list[InstanceRun]]:
        out: dict[float, list[InstanceRun]] = {}
        for inst in members:
            wanted = self.grace_override
            if wanted is None:
                wanted = inst.unit.planned.stop_grace
            out.setdefault(self.launcher.stop_budget(wanted), []).append(inst)
        return out

    async def _escalate_per_grace(self, members: list[InstanceRun], started: float) -> float:
        """SIGKILL each member still running at its grace's end; return the longest grace."""
        by_grace = self._by_grace(members)
        for grace in sorted(by_grace):
            group = by_grace[grace]
            immediate = await _wait_until(_exits(group), started + grace, self.kill_now)
            late = [i for i in group if i.running]
            if not late:
                continue
            reason = (
                "immediate stop requested"
                if immediate
                else f"did not exit {grace:g}s after SIGTERM"
            )
            for inst in late:
                self.emit(
                    "escalated",
                    step=inst.step,
                    unit=inst.planned.unit,
                    node=inst.planned.node,
                    detail=f"{reason}; sending SIGKILL",
                )
            await self.launcher.kill([i.handle for i in late if i.handle is not None])
        return max(by_grace, default=0.0)

    async def _chase_strays(self, tier: int, strays: list[int], not_before: float) -> None:
        """Rescan for the tier's escaped processes until none is left: each new one gets
        SIGTERM, and whatever is still alive after the tier's longest grace gets SIGKILL."""
        loop = asyncio.get_running_loop()
        for _ in range(STRAY_ROUNDS):
            more = self._strays_of(tier)
            if not more:
                return
            _term_strays([p for p in more if p not in strays])
            strays = list(dict.fromkeys([*strays, *more]))
            deadline = max(not_before, loop.time())
            while loop.time() < deadline and not self.kill_now.is_set():
                if not any(process.alive(p) for p in more):
                    break
                await asyncio.sleep(STRAY_POLL)
            left = [p for p in more if process.alive(p)]
            if left:
                self.emit(
                    "escalated",
                    pids=left,
                    detail="escaped processes did not exit after SIGTERM; sending SIGKILL",
                )
                for pid in left:
                    process.signal_pid(pid, signal.SIGKILL)

    # ------------------------------------------------------------------ the last sweep

    async def _final_sweep(self) -> None:
        """Whatever of the job is still around (unattributed strays, late forks) dies now."""
        running = {i.handle.pid for i in self.instances if i.running and i.handle is not None}
        # As a child subreaper every process the job started is our descendant: our children
        # are the complete list (srt stop's recovery path scans /proc by cookie instead).
        left = [pid for pid in self.launcher.stray_processes(self.cookie) if pid not in running]
        if left:
            self.emit(
                "sweep", pids=left, detail="processes left after the tiers stopped; sending SIGKILL"
            )
            for pid in left:
                process.signal_pid(pid, signal.SIGKILL)
        if not await self._gone_within(left, KILL_WAIT):
            self._report_stuck(left)

    async def _gone_within(self, pids: list[int], timeout: float) -> bool:
        """Whether every instance and every one of ``pids`` is gone within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            busy = [i for i in self.instances if i.running]
            remaining = [p for p in pids if process.alive(p)]
            if not busy and not remaining:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(STRAY_POLL)

    def _report_stuck(self, swept: list[int]) -> None:
        stuck: list[tuple[int, str | None]] = [
            (i.handle.pid, i.step) for i in self.instances if i.running and i.handle is not None
        ]
        stuck += [(p, None) for p in swept if process.alive(p)]
        for pid, step in stuck:
            state = process.proc_state(pid) or "?"
            what = (
                "unkillable (D state: uninterruptible sleep)"
                if state == "D"
                else f"still alive (state {state})"
            )
            self.unkillable.append(f"pid {pid}" + (f" ({step})" if step else "") + f": {what}")
            self.emit("unkillable", pid=pid, step=step, state=state)
