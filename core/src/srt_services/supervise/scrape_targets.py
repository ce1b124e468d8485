"""``<job_dir>/metrics/targets.json``: the targets whose process runs now, for Prometheus.

The plan lists every metrics endpoint of the job (:mod:`srt_services.plan.targets`), each
tied to the instance that serves it. This keeps the file Prometheus's ``file_sd`` reads in
step with the processes: a target is listed from its instance's launch to its exit, so a
restarted instance comes back and a stopped one is not scraped as "down" for the rest of
the job. Anyone's Prometheus can read the file (``file_sd_configs``); srt-exporters'
``prometheus`` kind is one reader.

Writes are atomic (a temporary file renamed over the old one, which is what ``file_sd``'s
watcher expects) and coalesced: a phase that launches 200 instances is one write, made
once the event loop is done with the launches.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from srt_services.contracts.context import JobPaths
from srt_services.jobdir.layout import atomic_write

if TYPE_CHECKING:
    from srt_services.contracts.plan import Plan, ScrapeTarget

#: How the orchestrator writes a job file: ``guarded(what, write)`` reports a failure once
#: and lets the job go on.
Guarded = Callable[[str, Callable[[], None]], bool]


class ScrapeTargets:
    """The ``file_sd`` file of one job; :meth:`started` and :meth:`stopped` as instances
    come and go. Does nothing for a plan without targets (metrics off, nothing scraped)."""

    def __init__(self, plan: Plan, job_dir: str, guarded: Guarded) -> None:
        self.path = JobPaths(job_dir=job_dir, job_id=plan.job_id).scrape_targets_file
        self._guarded = guarded
        self._groups: dict[str, list[dict[str, Any]]] = {}
        for t in plan.scrape_targets:
            self._groups.setdefault(t.step, []).append(_group(plan, t))
        #: the instances whose targets are listed, in plan order when written
        self._order = {step: i for i, step in enumerate(self._groups)}
        self._running: set[str] = set()
        self._pending = False

    @property
    def enabled(self) -> bool:
        return bool(self._groups)

    def open(self) -> None:
        """Write the empty list before anything launches (a scraper started in the first
        phase finds the file there)."""
        if self.enabled:
            self.flush()

    def started(self, step: str) -> None:
        if step in self._groups and step not in self._running:
            self._running.add(step)
            self._schedule()

    def stopped(self, step: str) -> None:
        if step in self._running:
            self._running.discard(step)
            self._schedule()

    def _schedule(self) -> None:
        if self._pending:
            return
        self._pending = True
        try:
            asyncio.get_running_loop().call_soon(self.flush_pending)
        except RuntimeError:  # no loop: write now
            self.flush()

    def flush_pending(self) -> None:
        """Write now if a change waits for its coalesced write: before a milestone
        (``phase_ready``, ``serving``) is announced, the file lists every instance it
        counts, as ``state.json`` does."""
        if self._pending:
            self.flush()

    def flush(self) -> None:
        """Write the file now if anything changed since the last write (or on first use)."""
        self._pending = False
        steps = sorted(self._running, key=self._order.__getitem__)
        groups = [g for step in steps for g in self._groups[step]]
        data = orjson.dumps(groups, option=orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE)

        def write() -> None:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            atomic_write(self.path, data)

        self._guarded("metrics/targets.json", write)

    def close(self) -> None:
        """The last write, for a change the event loop had no turn left to write."""
        self.flush_pending()


def _group(plan: Plan, t: ScrapeTarget) -> dict[str, Any]:
    """One ``file_sd`` target group: its address and the labels every sample gets."""
    return {
        "targets": [t.address],
        "labels": {
            "job": plan.job_name,
            "job_id": plan.job_id,
            "service": t.service,
            "role": t.role,
            "node": t.node,
            "instance": t.name,
            "step": t.step,
            "__metrics_path__": t.path,
        },
    }
