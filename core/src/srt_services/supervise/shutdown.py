"""The shutdown coordinator: one teardown for every way a job ends.

Tiers stop in reverse dependency order: tier 0 (benchmark, after_frontend services, the
frontend, workers), then tier 1 (before_workers services), then tier 2 (infra: etcd, NATS),
so workers deregister while the discovery plane still answers. Within a tier every process
is signalled at once (SIGTERM, then SIGCONT so a stopped process can act on it); each gets
its own grace, then SIGKILL. A second Ctrl-C (or ``srt stop --now``) skips the graces.

Processes that escaped their instance's process group (a double fork, ``setsid``, a
scrubbed environment) are stopped like instances: the launcher lists them
(:meth:`~srt_services.contracts.launcher.Launcher.stray_processes`: the job's cgroup, or a
walk down the orchestrator's process tree, which as the job's child subreaper holds every
orphan of the job; the last look reads every process for the sessions srt created and the
cookie), and each gets SIGTERM to
its whole process group with its tier, then SIGKILL to that group at the end of the grace
of the unit it escaped from, plus the kernel's ``cgroup.kill`` of the unit's leaf where
there is one. Then a rescan waits for the kills to land and catches what they orphaned,
again and again until nothing of the tier is left or the budget (``KILL_WAIT``) is spent.
A last sweep does the same for the whole job; whatever survives SIGKILL (uninterruptible
sleep) is reported, not waited for forever.

The coordinator is handed what it acts on (:class:`Shutdown`): the instances, the
launcher, the cookie, the "kill now" event and the event writer. It never sees the
orchestrator, so the orchestrator can call it without either importing the other's
internals.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.launch import process
from srt_services.launch.pidwatch import ExitWatch
from srt_services.supervise.runs import Emit, InstanceRun

if TYPE_CHECKING:
    from srt_services.contracts.launcher import Launcher

#: How long SIGKILLed processes may take to disappear before they are reported.
KILL_WAIT = 5.0
#: Polling step of the last check that every instance and swept process is gone.
STRAY_POLL = 0.02


def signal_groups(pids: Iterable[int], *sigs: int) -> None:
    """Each of ``sigs`` to each process's whole process group (never the orchestrator's
    own), and to the process itself (it may have left its group since)."""
    mine = os.getpgrp()
    done: set[int] = set()
    for pid in pids:
        try:
            pgid = os.getpgid(pid)  # one system call; /proc/<pid>/stat costs three
        except OSError:
            continue
        if pgid != mine and pgid not in done:
            done.add(pgid)
            for sig in sigs:
                process.signal_group(pgid, sig)
            if pgid == pid:
                continue  # a group leader: the group's signal reached it
        for sig in sigs:
            process.signal_pid(pid, sig)


def _term(pids: Iterable[int]) -> None:
    signal_groups(pids, signal.SIGTERM, signal.SIGCONT)


async def _wait_until(
    futures: set[asyncio.Future[int]], deadline: float, kill_now: asyncio.Event
) -> bool:
    """Wait for ``futures`` until ``deadline`` (loop time); True if an immediate kill was
    asked."""
    pending = {f for f in futures if not f.done()}
    if not pending or kill_now.is_set():
        return kill_now.is_set()
    loop = asyncio.get_running_loop()
    killer = asyncio.ensure_future(kill_now.wait())
    try:
        while pending and not killer.done() and loop.time() < deadline:
            await asyncio.wait(
                pending | {killer},
                timeout=deadline - loop.time(),
                return_when=asyncio.FIRST_COMPLETED,
            )
            pending = {f for f in pending if not f.done()}
    finally:
        if not killer.done():
            killer.cancel()
    return kill_now.is_set()


def _exits(members: Sequence[InstanceRun]) -> set[asyncio.Future[int]]:
    return {i.exit_fut for i in members if i.exit_fut is not None}


async def stop_instances(
    insts: Sequence[InstanceRun],
    launcher: Launcher,
    grace: float,
    kill_now: asyncio.Event,
    emit: Emit,
    reason: str,
) -> None:
    """Stop some instances while the job goes on, like any stop: SIGTERM (the stop
    signal), ``grace``, then SIGKILL (a readiness timeout, a failed liveness probe).
    Services that clean up on SIGTERM (databases, the oarbank agent) get to."""
    live = [i for i in insts if i.running and i.handle is not None]
    if not live:
        return
    await launcher.terminate([i.handle for i in live if i.handle is not None])
    loop = asyncio.get_running_loop()
    await _wait_until(_exits(live), loop.time() + grace, kill_now)
    late = [i for i in live if i.running]
    for inst in late:
        emit(
            "escalated",
            step=inst.step,
            unit=inst.planned.unit,
            node=inst.planned.node,
            detail=f"{reason}: did not exit {grace:g}s after SIGTERM; sending SIGKILL",
        )
    if late:
        await launcher.kill([i.handle for i in late if i.handle is not None])
        launcher.sweep([i.step for i in late])
        await _wait_until(_exits(late), loop.time() + KILL_WAIT, asyncio.Event())


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
    _grace_of: dict[str, float] = field(init=False, repr=False)
    _snapshot: dict[int, str | None] = field(init=False, repr=False, default_factory=dict)
    #: the last scan found nothing of the job, and no instance ran
    _clean: bool = field(init=False, repr=False, default=False)
    #: the last scan was a launcher's complete look (``stray_processes(final=True)``)
    _complete: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        self._tier_of = {i.step: i.unit.planned.tier for i in self.instances}
        self._grace_of = {i.step: self._grace(i) for i in self.instances}

    def _grace(self, inst: InstanceRun) -> float:
        wanted = self.grace_override
        if wanted is None:
            wanted = inst.unit.planned.stop_grace
        return self.launcher.stop_budget(wanted)

    async def run(self) -> list[str]:
        """Stop every tier, then sweep; return what could not be killed."""
        self._watch = ExitWatch()
        try:
            tiers = sorted(set(self._tier_of.values()))
            for n, tier in enumerate(tiers):
                await self._stop_tier(tier, first=n == 0, last=n == len(tiers) - 1)
            if not self._tier_of:
                self._snapshot = self._strays()
                self.launcher.teardown_started()
            await self._final_sweep()
        finally:
            self._watch.close()
        return self.unkillable

    # ------------------------------------------------------------------ one tier

    def _strays(self, final: bool = False) -> dict[int, str | None]:
        running = {i.handle.pid for i in self.instances if i.running and i.handle is not None}
        found = self.launcher.stray_processes(self.cookie, final=final)
        # nothing of the job at all (no instance, no stray): nothing can appear later
        # either, since only a process of the job could start one
        self._clean = not found and not running
        self._complete = final
        strays = {pid: step for pid, step in found.items() if pid not in running}
        # a pidfd each: the waits below wake when they exit instead of polling /proc
        self._watch.add(strays, seen_alive=True)
        return strays

    def _in_tier(self, tier: int) -> Callable[[str | None], bool]:
        return lambda step: step is not None and self._tier_of.get(step) == tier

    async def _stop_tier(self, tier: int, first: bool = False, last: bool = False) -> None:
        """Signal the whole tier at once, then wait: one deadline per grace value, one SIGKILL
        batch per deadline (so 200 instances cost one wait, not 200 timers).

        The first tier's instances are signalled before anything else is looked at; then one
        look at the escaped processes serves every tier (each tier rescans after its kills:
        orphans appear as their parents die), and the launcher may start releasing what it
        held for launches (a thread: it must not delay those first signals). The grace
        counts from the tier's SIGTERM, not from the end of that look. The last tier's
        rescans are the launcher's complete look: when they find nothing of the job, that
        is the final sweep's answer too."""
        loop = asyncio.get_running_loop()
        members = [i for i in self.instances if i.unit.planned.tier == tier and i.running]
        handles = [i.handle for i in members if i.handle is not None]
        if handles:
            await self.launcher.terminate(handles)
        started = loop.time()
        if first:
            self._snapshot = self._strays()
        in_tier = self._in_tier(tier)
        tiered = [p for p, s in self._snapshot.items() if in_tier(s)]
        strays = {p: self._snapshot[p] for p in self._watch.alive(tiered)}
        _term(strays)
        if first:
            self.launcher.teardown_started()
        if not members and not strays:
            return
        self.emit(
            "stopping_tier",
            tier=tier,
            steps=[i.step for i in members],
            strays=sorted(strays) or None,
        )
        for inst in members:
            inst.state = "stopping"
        longest, killed, gone = await self._escalate_per_grace(members, strays, started)
        # Wait for the SIGKILLed (a rescan before they are gone would find them again),
        # then for what their deaths orphaned.
        await self._watch.wait(gone, loop.time() + KILL_WAIT, _exits(members))
        if killed:
            # the kernel's sweep of what was SIGKILLed, once their groups are gone: most
            # leaves are empty by now and cost a read instead of a cgroup.kill each
            self.launcher.sweep(sorted(killed))
        await self._chase(in_tier, started + longest, started + longest + KILL_WAIT, final=last)

    async def _escalate_per_grace(
        self, members: list[InstanceRun], strays: dict[int, str | None], started: float
    ) -> tuple[float, set[str], list[int]]:
        """SIGKILL each member, and each escaped process, still running at the end of its
        unit's grace; return the longest grace, the steps that needed SIGKILL and the
        escaped processes that did."""
        killed: set[str] = set()
        gone: list[int] = []
        by_grace: dict[float, tuple[list[InstanceRun], list[int]]] = {}
        for inst in members:
            by_grace.setdefault(self._grace_of[inst.step], ([], []))[0].append(inst)
        for pid, step in strays.items():
            by_grace.setdefault(self._grace_of.get(step or "", 0.0), ([], []))[1].append(pid)
        for grace in sorted(by_grace):
            group, escaped = by_grace[grace]
            late_escaped = await self._watch.wait(
                escaped, started + grace, _exits(group), self.kill_now
            )
            immediate = self.kill_now.is_set()
            late = [i for i in group if i.running]
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
            if late:
                await self.launcher.kill([i.handle for i in late if i.handle is not None])
            if late_escaped:
                signal_groups(late_escaped, signal.SIGKILL)
                self.emit(
                    "escalated",
                    pids=late_escaped,
                    detail=f"escaped processes {reason}; sent SIGKILL to their process groups",
                )
                gone += late_escaped
                # escaped processes are not waited for by exit: sweep their leaves now
                self.launcher.sweep(sorted({s for p in late_escaped if (s := strays[p])}))
            killed.update(i.step for i in late)
        return max(by_grace, default=0.0), killed, gone

    async def _chase(
        self,
        wanted: Callable[[str | None], bool],
        grace_end: float,
        budget_end: float,
        final: bool = False,
    ) -> list[int]:
        """Rescan until nothing ``wanted`` is left: a process found before ``grace_end``
        gets SIGTERM and the rest of the grace, one found after it SIGKILL at once; each
        round waits for its kills to land. Returns what is still alive at ``budget_end``."""
        loop = asyncio.get_running_loop()
        termed: set[int] = set()
        while True:
            more = {p: s for p, s in self._strays(final).items() if wanted(s)}
            if not more:
                return []
            if loop.time() >= budget_end:
                return list(more)
            if loop.time() < grace_end and not self.kill_now.is_set():
                fresh = [p for p in more if p not in termed]
                _term(fresh)
                termed.update(fresh)
                await self._watch.wait(more, grace_end, interrupt=self.kill_now)
                continue
            signal_groups(more, signal.SIGKILL)
            self.emit(
                "escalated",
                pids=sorted(more),
                detail="processes left after the grace; sent SIGKILL to their process groups",
            )
            self.launcher.sweep(sorted({s for s in more.values() if s}))
            await self._watch.wait(more, min(budget_end, loop.time() + 1.0))

    # ------------------------------------------------------------------ the last sweep

    async def _final_sweep(self) -> None:
        """Whatever of the job is still around (unattributed strays, late forks) dies now.

        With the kernel's bookkeeping (a cgroup), a look that found nothing of the job is
        the last word. Without it, the looks between kills walk the orchestrator's own
        process tree; the last one reads every process of the machine (the sessions srt
        created, the cookie), for whatever the walk cannot see: the last tier's final
        rescan when it found nothing, else one here."""
        loop = asyncio.get_running_loop()
        complete = self._complete or self.launcher.cgroup_path() is not None
        last_word = self._clean and not self._busy() and complete
        left = [] if last_word else list(self._strays(final=True))
        stuck: list[int] = []
        if left:
            signal_groups(left, signal.SIGKILL)
            self.emit(
                "sweep", pids=left, detail="processes left after the tiers stopped; sent SIGKILL"
            )
            self.launcher.sweep(None)
            await self._watch.wait(left, loop.time() + 1.0)
            stuck = await self._chase(
                lambda _: True, loop.time(), loop.time() + KILL_WAIT, final=True
            )
        else:
            # nothing found: still let the kernel's bookkeeping have the last word (a
            # process forked between the scan and now), at the cost of reading its leaves
            self.launcher.sweep(None)
        if not await self._gone_within(stuck, 0.5) or stuck:
            self._report_stuck(stuck)

    def _busy(self) -> bool:
        return any(i.running for i in self.instances)

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
