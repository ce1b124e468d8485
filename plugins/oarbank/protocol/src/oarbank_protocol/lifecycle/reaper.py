"""Reaping owned objects whose attempt is gone, and only those (fault matrix L07-L09).

The decision is deliberately narrow and fail-safe:

* only objects labelled for *this* node and *this* service, with a valid id and, when the
  module reports an owner uid, our uid, are candidates; unlabelled objects are never touched;
* attempts admitted through this manager are live by definition and never asked about;
* liveness is asked once per period for the whole set of attempt ids; if the callable raises
  or times out, nothing is reaped this period (the SchedMD epilog lesson: "unknown" is not
  "dead"); an attempt missing from its answer counts as unknown too;
* the work per period is bounded (a cap on destroys and a time budget), classification is
  linear, and whatever was not destroyed is simply found again next period.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from oarbank_protocol.documents import LABEL_ATTEMPT, LABEL_NODE, LABEL_SERVICE, OwnedObject
from oarbank_protocol.errors import ExecError, OarbankError
from oarbank_protocol.names import is_object_id

log = logging.getLogger(__name__)

Liveness = Callable[[frozenset[str]], Awaitable[Mapping[str, bool]]]
"""Given attempt ids, say which are live (True) or dead (False); omit or raise if unsure."""


class LivenessUnknown(OarbankError):
    """A liveness source cannot tell right now (scheduler unreachable, file missing)."""


@dataclass(frozen=True)
class ReapPolicy:
    node_id: str
    service: str
    uid: int | None = field(default_factory=os.getuid)
    max_destroys: int = 64
    concurrency: int = 4
    budget_s: float = 30.0
    liveness_timeout_s: float = 10.0


@dataclass
class ReapReport:
    service: str
    listed: int = 0
    candidates: int = 0
    ignored_unlabelled: int = 0
    ignored_foreign: int = 0
    live: int = 0
    unknown: int = 0
    dead: int = 0
    destroyed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    deferred: int = 0
    skipped: str | None = None
    duration_s: float = 0.0


def select_candidates(
    objects: Iterable[OwnedObject], policy: ReapPolicy, report: ReapReport
) -> list[OwnedObject]:
    """Objects we may consider at all; counts the others into ``report``."""
    chosen: list[OwnedObject] = []
    for obj in objects:
        report.listed += 1
        labels = obj.labels
        if not (labels.get(LABEL_ATTEMPT) and labels.get(LABEL_NODE) and labels.get(LABEL_SERVICE)):
            report.ignored_unlabelled += 1
            continue
        if (
            labels[LABEL_NODE] != policy.node_id
            or labels[LABEL_SERVICE] != policy.service
            or (obj.uid is not None and policy.uid is not None and obj.uid != policy.uid)
            or not is_object_id(obj.id)
        ):
            report.ignored_foreign += 1
            continue
        chosen.append(obj)
    report.candidates = len(chosen)
    return chosen


async def ask_liveness(
    liveness: Liveness, attempts: frozenset[str], timeout_s: float
) -> Mapping[str, bool]:
    """Call the liveness source with a deadline; any problem becomes :class:`LivenessUnknown`."""
    if not attempts:
        return {}
    try:
        async with asyncio.timeout(timeout_s):
            answer = await liveness(attempts)
    except TimeoutError:
        raise LivenessUnknown(f"liveness check timed out after {timeout_s:g} s") from None
    except LivenessUnknown:
        raise
    except Exception as exc:
        raise LivenessUnknown(f"liveness check failed: {exc}") from exc
    if not isinstance(answer, Mapping):
        raise LivenessUnknown("liveness check returned something other than a mapping")
    return answer


DestroyFn = Callable[[str], Awaitable[object]]


async def reap_objects(
    objects: Iterable[OwnedObject],
    *,
    policy: ReapPolicy,
    liveness: Liveness | None,
    local_live: frozenset[str],
    destroy: DestroyFn,
) -> ReapReport:
    """One reaping period over an already fetched list (see module docstring)."""
    began = time.monotonic()
    report = ReapReport(policy.service)
    candidates = select_candidates(objects, policy, report)
    to_ask = frozenset(o.labels[LABEL_ATTEMPT] for o in candidates) - local_live
    if liveness is None:
        return _skipped(report, "no liveness source configured", len(candidates), began)
    try:
        answer = await ask_liveness(liveness, to_ask, policy.liveness_timeout_s)
    except LivenessUnknown as exc:
        return _skipped(report, str(exc), len(candidates), began)
    dead = _classify(candidates, answer, local_live, report)
    batch = dead[: policy.max_destroys]
    report.deferred = len(dead) - len(batch)
    await _destroy_within_budget(batch, policy, destroy, report)
    report.duration_s = time.monotonic() - began
    return report


def _skipped(report: ReapReport, reason: str, candidates: int, began: float) -> ReapReport:
    """A period that reaps nothing: every candidate counts as unknown."""
    report.skipped = reason
    report.unknown = candidates
    report.duration_s = time.monotonic() - began
    return report


def _classify(
    candidates: list[OwnedObject],
    answer: Mapping[str, bool],
    local_live: frozenset[str],
    report: ReapReport,
) -> list[OwnedObject]:
    """The dead candidates; counts live and unknown ones (and the dead) into ``report``."""
    dead: list[OwnedObject] = []
    for obj in candidates:
        attempt = obj.labels[LABEL_ATTEMPT]
        verdict = True if attempt in local_live else answer.get(attempt)
        if verdict is True:
            report.live += 1
        elif verdict is False:
            dead.append(obj)
        else:
            report.unknown += 1
    report.dead = len(dead)
    return dead


async def _destroy_within_budget(
    batch: list[OwnedObject], policy: ReapPolicy, destroy: DestroyFn, report: ReapReport
) -> None:
    """Destroy ``batch`` (``policy.concurrency`` at a time) until ``policy.budget_s`` is up.

    Each object ends in ``report.destroyed`` or ``report.failed``, the ones the budget cut
    off included (they are found again next period).
    """
    if not batch:
        return
    semaphore = asyncio.Semaphore(max(policy.concurrency, 1))

    async def one(obj: OwnedObject) -> None:
        async with semaphore:
            try:
                await destroy(obj.id)
            except ExecError as exc:
                report.failed[obj.id] = exc.reason
            else:
                report.destroyed.append(obj.id)

    pending = [asyncio.ensure_future(one(obj)) for obj in batch]
    _, not_done = await asyncio.wait(pending, timeout=policy.budget_s)
    for task in not_done:
        task.cancel()
    if not_done:
        await asyncio.gather(*not_done, return_exceptions=True)
    finished = set(report.destroyed) | set(report.failed)
    for obj in batch:
        if obj.id not in finished:
            report.failed[obj.id] = f"not reached within the {policy.budget_s:g} s budget"


# --------------------------------------------------------------------------- liveness sources


def static_liveness(live: Iterable[str]) -> Liveness:
    """Exactly these attempts are live, every other one is dead."""
    known = frozenset(live)

    async def check(attempts: frozenset[str]) -> Mapping[str, bool]:
        return {a: a in known for a in attempts}

    return check


def file_liveness(path: Path) -> Liveness:
    """Live attempts listed in a JSON file (``["a1", ...]`` or ``{"live": [...]}``).

    ``{"live": [...], "scope": "PREFIX"}`` speaks only for attempt ids starting with
    ``PREFIX`` (the writer knows one job's attempts, say, not the node's): the others are
    left out of the answer, i.e. unknown, and never reaped on its word. With a ``"dead"``
    list too, only the attempts it names are dead and those in neither list are unknown (a
    writer that may not have seen an attempt yet says so). A missing or unreadable file
    means "unknown", never "everything is dead".
    """

    async def check(attempts: frozenset[str]) -> Mapping[str, bool]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise LivenessUnknown(f"cannot read live attempts from {path}: {exc}") from None
        live = data.get("live") if isinstance(data, dict) else data
        if not isinstance(live, list) or not all(isinstance(a, str) for a in live):
            raise LivenessUnknown(f"{path} must hold a list of attempt ids")
        scope = data.get("scope", "") if isinstance(data, dict) else ""
        if not isinstance(scope, str):
            raise LivenessUnknown(f"{path}: scope must be a string")
        known = set(live)
        dead = data.get("dead") if isinstance(data, dict) else None
        if dead is not None:
            if not isinstance(dead, list) or not all(isinstance(a, str) for a in dead):
                raise LivenessUnknown(f"{path}: dead must be a list of attempt ids")
            gone = set(dead) - known
            return {
                a: a in known for a in attempts if a.startswith(scope) and (a in known or a in gone)
            }
        return {a: a in known for a in attempts if a.startswith(scope)}

    return check
