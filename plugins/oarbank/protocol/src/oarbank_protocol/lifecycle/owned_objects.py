"""One service's owned objects: reaping those of dead attempts, and the teardown check.

The decisions (which objects are candidates, who is alive, how much work per period) are
:mod:`~oarbank_protocol.lifecycle.reaper`'s; this is where they meet one service: its
``list_owned`` and ``destroy`` ops, its lock (reaping never runs while the service starts or
stops: CNI's GC exclusivity), the attempts admitted here (live by definition), and the
events the agent logs.

At teardown, a ``destroy`` that exits 0 is a claim and ``list_owned`` afterwards is the
check (:meth:`OwnedObjects.clear`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from oarbank_protocol.documents import LABEL_ATTEMPT
from oarbank_protocol.errors import ExecError
from oarbank_protocol.execution.client import ServiceOps
from oarbank_protocol.lifecycle.clock import Clock
from oarbank_protocol.lifecycle.events import Emit
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.lifecycle.reaper import (
    Liveness,
    LivenessUnknown,
    ReapPolicy,
    ReapReport,
    ask_liveness,
    reap_objects,
    select_candidates,
)

log = logging.getLogger(__name__)


@dataclass
class ClearReport:
    """What a teardown's reaping left: ids still listed, ids it had to force, why not clean."""

    reap: ReapReport
    forced: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    problem: str = ""

    @property
    def clean(self) -> bool:
        return not (self.leftovers or self.forced or self.failed or self.problem)


class OwnedObjects:
    """Reaps one service's owned objects (see the module docstring)."""

    def __init__(
        self,
        name: str,
        ops: ServiceOps,
        *,
        node_id: str,
        options: SupervisorOptions,
        liveness: Liveness | None,
        lock: asyncio.Lock,
        live_here: Callable[[], Iterable[str]],
        emit: Emit,
    ) -> None:
        self.name = name
        self.ops = ops
        self.node_id = node_id
        self.options = options
        self.liveness = liveness
        #: the service's lock: held by start, stop and reaping, one at a time
        self.lock = lock
        #: the attempts admitted here right now (never asked about, never reaped)
        self.live_here = live_here
        self.emit = emit
        self.last_reap: ReapReport | None = None

    def policy(self) -> ReapPolicy:
        return ReapPolicy(
            node_id=self.node_id,
            service=self.name,
            max_destroys=self.options.max_destroys_per_period,
            concurrency=self.options.destroy_concurrency,
            budget_s=self.options.reap_budget_s,
            liveness_timeout_s=self.options.liveness_timeout_s,
        )

    async def reap_once(self, liveness: Liveness | None = None) -> ReapReport:
        """One reaping period (see :mod:`~oarbank_protocol.lifecycle.reaper`); never
        concurrent with start or stop. ``liveness`` overrides the service's own."""
        policy = self.policy()
        async with self.lock:
            try:
                owned = await self.ops.list_owned()
            except ExecError as exc:
                report = ReapReport(self.name, skipped=f"list_owned failed: {exc.reason}")
                self.emit("reap_failed", report.skipped or "")
                self.last_reap = report
                return report

            async def destroy(object_id: str) -> object:
                return await self.ops.destroy(object_id)

            report = await reap_objects(
                owned.objects,
                policy=policy,
                liveness=liveness or self.liveness,
                local_live=frozenset(self.live_here()),
                destroy=destroy,
            )
        self.last_reap = report
        if report.skipped and report.candidates:
            self.emit("reap_skipped", f"not reaping this period: {report.skipped}")
        if report.destroyed:
            self.emit(
                "reaped",
                f"destroyed {len(report.destroyed)} object(s) of dead attempts",
                ids=list(report.destroyed),
            )
        if report.failed:
            self.emit(
                "reap_failed",
                f"{len(report.failed)} destroy(s) failed; retrying next period",
                failed=dict(report.failed),
            )
        return report

    async def reap_periodically(self, clock: Clock, closing: Callable[[], bool]) -> None:
        """Reap every ``reap_period_s`` until ``closing()``; a failed period is retried at
        the next one."""
        while not closing():
            await clock.sleep(self.options.reap_period_s)
            if closing():
                return
            try:
                await self.reap_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: reaping failed; will retry next period", self.name)

    async def clear(self, liveness: Liveness) -> ClearReport:
        """Teardown: reap what belongs to attempts that are not live, then check it is gone.

        A destroy that exits 0 is a claim; ``list_owned`` afterwards is the check. An object
        still busy after a stop means something the module started still runs: it is
        destroyed with ``--force`` (the attempt is gone and the service stopped) and reported,
        because the stop did not do what it said.
        """
        reap = await self.reap_once(liveness)
        out = ClearReport(reap)
        for round_ in range(2):
            async with self.lock:
                try:
                    owned = await self.ops.list_owned()
                except ExecError as exc:
                    out.problem = f"list_owned after reaping failed: {exc.reason}"
                    return out
                scratch = ReapReport(self.name)
                candidates = select_candidates(owned.objects, self.policy(), scratch)
                attempts = frozenset(o.labels[LABEL_ATTEMPT] for o in candidates)
                try:
                    answer = await ask_liveness(liveness, attempts, self.options.liveness_timeout_s)
                except LivenessUnknown as exc:
                    out.problem = f"cannot tell which attempts are live: {exc}"
                    out.leftovers = sorted(o.id for o in candidates)
                    return out
                gone = [o for o in candidates if answer.get(o.labels[LABEL_ATTEMPT]) is not True]
                out.leftovers = sorted(o.id for o in gone)
                busy = [o.id for o in gone if o.busy]
                if round_ == 1 or not busy:
                    return out
                self.emit(
                    "protocol_violation",
                    f"{len(busy)} owned object(s) still busy after the service stopped: "
                    f"{', '.join(busy[:5])}; destroying them with --force",
                )
                for object_id in busy:
                    try:
                        await self.ops.destroy(object_id, force=True)
                    except ExecError as exc:
                        out.failed[object_id] = exc.reason
                    else:
                        out.forced.append(object_id)
        return out
