"""``srt restart JOBDIR SERVICE`` and ``srt stop JOBDIR SERVICE``: one service of a running
job, acted on by its orchestrator, asked through the job directory's control socket."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from srt_services.jobdir.control import ControlError, ControlRefused, Request, ask


@dataclass(frozen=True, slots=True)
class ServiceRequest:
    #: ``restart`` or ``stop``
    op: str
    job_dir: str
    #: a service (or role) name, or one instance's step
    service: str
    #: a critical unit too
    force: bool = False
    #: until the operation finished (``False``: once the orchestrator accepted it)
    wait: bool = True


@dataclass(frozen=True, slots=True)
class ServiceOutcome:
    ok: bool
    #: the orchestrator refused it (rather than failed doing it)
    refused: bool
    text: str


def targets(job_dir: str, name: str) -> list[str]:
    """What ``name`` stands for in the job: itself when it is a unit or a step (or selects
    nothing: the orchestrator's refusal then lists the units), else the units and steps a
    shell pattern or a worker name selects, as ``srt logs`` reads them (a unit whose every
    instance is selected by its name, otherwise each step)."""
    from srt_services.jobdir.layout import JobDirError
    from srt_services.jobdir.view import JobView
    from srt_services.logview.sources import CATEGORIES, select

    try:
        view = JobView.read(job_dir)
    except JobDirError:
        return [name]
    plan = view.plan
    if plan is None or name in CATEGORIES:
        return [name]
    if any(u.name == name for u in plan.units) or any(
        i.step == name for u in plan.units for i in u.instances
    ):
        return [name]
    try:
        chosen = {s.step for s in select(view, [name]) if s.step is not None}
    except JobDirError:
        return [name]
    out: list[str] = []
    for unit in plan.units:
        steps = [i.step for i in unit.instances]
        if steps and all(s in chosen for s in steps):
            out.append(unit.name)
        else:
            out.extend(s for s in steps if s in chosen)
    return out or [name]


def act_on(request: ServiceRequest, note: Callable[[str], None]) -> list[ServiceOutcome]:
    """:func:`act` on every unit or step ``request.service`` stands for (see
    :func:`targets`), one after the other; ``note`` hears which one when there are several."""
    names = targets(request.job_dir, request.service)
    if len(names) > 1:
        note(f"{request.service!r} selects {', '.join(names)}")
    outcomes = []
    for name in names:
        one = ServiceRequest(request.op, request.job_dir, name, request.force, request.wait)
        outcomes.append(act(one, note))
    return outcomes


def act(request: ServiceRequest, note: Callable[[str], None]) -> ServiceOutcome:
    """Send the request; ``note`` hears its progress. A job that cannot be asked (no
    orchestrator, no socket, not the user's) is an outcome, not an exception."""
    command = ["srt", request.op, os.path.abspath(request.job_dir), request.service]
    if request.force:
        command.append("--force")
    try:
        reply = ask(
            request.job_dir,
            Request(request.op, request.service, request.force, request.wait),
            shlex.join(command),
            note,
        )
    except ControlError as exc:
        return ServiceOutcome(False, isinstance(exc, ControlRefused), str(exc))
    return ServiceOutcome(reply.ok, reply.refused, reply.text)
