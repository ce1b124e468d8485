"""Deciding about processes that hold a port a phase needs.

Shared by both launchers: find the holders, reap the ones that are provably leftovers of a
finished srt job, wait for the ports to free up, and describe whatever is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from srt_services.contracts.launcher import Preflight
from srt_services.jobdir.layout import JobDirError
from srt_services.jobdir.view import JobView
from srt_services.launch.portcheck import Holder, PortReport

#: How long a reaped leftover may take to release its port.
RELEASE_WAIT = 3.0


def is_stale_local(h: Holder) -> bool:
    """A holder from an srt job whose directory says its orchestrator is gone."""
    if not h.cookie or not h.job_dir:
        return False
    try:
        view = JobView.read(h.job_dir)
    except (JobDirError, OSError):
        return False  # not provably over: left alone, and reported as a port problem
    return view.cookie == h.cookie and not view.orchestrator_alive()


async def settle_ports(
    targets: list[tuple[str, int]],
    check: Callable[[list[tuple[str, int]]], Awaitable[list[PortReport]]],
    reap: Callable[[list[Holder]], Awaitable[None]],
    stale: Callable[[Holder], bool],
    names: dict[tuple[str, int], str] | None = None,
) -> Preflight:
    """``names`` says how to call each target in a problem (``service_x: port 80 on n1``)."""
    result = Preflight()
    reports = await check(targets)
    busy = [r for r in reports if not r.free]
    if not busy:
        return result
    to_reap: list[Holder] = []
    for r in busy:
        if r.holders and all(stale(h) for h in r.holders):
            to_reap.extend(h for h in r.holders if h not in to_reap)
    if to_reap:
        await reap(to_reap)
        result.reaped = [h.describe() for h in to_reap]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RELEASE_WAIT
        while True:
            reports = await check([(r.address, r.port) for r in busy])
            busy = [r for r in reports if not r.free]
            if not busy or loop.time() >= deadline:
                break
            await asyncio.sleep(0.05)
    for r in busy:
        holders = "; ".join(h.describe() for h in r.holders)
        where = (names or {}).get((r.address, r.port), f"port {r.port} on {r.address}")
        result.problems.append(f"{where} is already in use by {holders}")
    return result
