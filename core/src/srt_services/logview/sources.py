"""Which log files ``srt logs`` reads: every instance of the job, or what the names given
select.

A name selects, in this order: a unit (a service, a role, ``frontend``, ``benchmark``: all
its instances), one instance by its step, a worker (``decode_0``: its instances on every
node), a category (``services``, ``workers``), or any other file in ``logs/`` by its name
without ``.out`` (``sbatch``, ``service_kv-router.build``). Shell patterns (``prefill_*``)
match the same names. The plan says which instances there are, so an instance that has
not written anything yet is still followed.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from srt_services.jobdir.layout import JobDirError
from srt_services.jobdir.view import JobView

#: What the category names select.
CATEGORIES = {"services": "service", "workers": "workers"}


@dataclass(frozen=True, slots=True)
class LogSource:
    #: the prefix: the instance's step, or the file's name without ``.out``
    name: str
    path: str
    unit: str | None = None
    step: str | None = None
    #: the job directory: the file is read only if it is inside it (links included)
    root: str | None = None


def all_sources(view: JobView) -> tuple[list[LogSource], list[LogSource]]:
    """(the instances' logs in plan order, the other files in ``logs/``)."""
    instances: list[LogSource] = []
    if view.plan is not None:
        for unit in view.plan.units:
            for inst in unit.instances:
                instances.append(
                    LogSource(
                        inst.step,
                        os.path.join(view.job.path, inst.log),
                        unit.name,
                        inst.step,
                        view.job.path,
                    )
                )
    elif view.state is not None:
        for step, recorded in view.state.instances.items():
            instances.append(
                LogSource(
                    step,
                    os.path.join(view.job.path, recorded.log),
                    recorded.unit,
                    step,
                    view.job.path,
                )
            )
    known = {s.path for s in instances}
    try:
        names = sorted(os.listdir(view.job.logs))
    except OSError:
        names = []
    others = [
        LogSource(n.removesuffix(".out"), os.path.join(view.job.logs, n), root=view.job.path)
        for n in names
        if n.endswith(".out") and os.path.join(view.job.logs, n) not in known
    ]
    return instances, others


def select(view: JobView, names: Sequence[str]) -> list[LogSource]:
    """The sources ``names`` select (all instances when none); :class:`JobDirError` naming
    what is known when a name selects nothing."""
    instances, others = all_sources(view)
    if not names:
        return instances
    units = _units(view)
    workers = _workers(view)
    chosen: dict[str, LogSource] = {}
    for name in names:
        found = _match(name, instances, others, units, workers)
        if not found:
            known = sorted({s.unit for s in instances if s.unit})
            extra = ", ".join(s.name for s in others)
            raise JobDirError(
                f"no unit, step, worker or log file named {name!r} in {view.job.path}"
                f" (units: {', '.join(known) or 'none'}; categories: services, workers"
                + (f"; other logs: {extra}" if extra else "")
                + ")"
            )
        for source in found:
            chosen.setdefault(source.path, source)
    order = {s.path: i for i, s in enumerate([*instances, *others])}
    return sorted(chosen.values(), key=lambda s: order[s.path])


def _units(view: JobView) -> dict[str, str]:
    """unit -> category."""
    if view.plan is None:
        return {}
    return {u.name: u.category for u in view.plan.units}


def _workers(view: JobView) -> dict[str, str | None]:
    """step -> worker."""
    if view.plan is None:
        return {}
    return {i.step: i.worker for u in view.plan.units for i in u.instances}


def _match(
    name: str,
    instances: list[LogSource],
    others: list[LogSource],
    units: dict[str, str],
    workers: dict[str, str | None],
) -> list[LogSource]:
    def hit(value: str | None) -> bool:
        return value is not None and fnmatch.fnmatchcase(value, name)

    category = CATEGORIES.get(name)
    tests: tuple[Callable[[LogSource], bool], ...] = (
        lambda s: hit(s.unit),
        lambda s: hit(s.step),
        lambda s: hit(workers.get(s.step or "")),
        lambda s: category is not None and units.get(s.unit or "") == category,
    )
    for test in tests:
        found = [s for s in instances if test(s)]
        if found:
            return found
    return [s for s in others if hit(s.name)]
