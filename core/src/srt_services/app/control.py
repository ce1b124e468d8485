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
