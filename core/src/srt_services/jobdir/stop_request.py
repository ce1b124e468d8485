"""``stop-request.json``: how the orchestrator learns that ``srt stop`` ended its job.

A stop signal alone does not say who sent it: Ctrl-C, ``kill``, Slurm's time-limit signal
and ``srt stop`` all arrive as SIGTERM or SIGINT. ``srt stop JOBDIR`` therefore writes this
file (who, from where, when, for which job cookie) *before* it signals, and the
orchestrator reads and removes it when the signal arrives: the job then ends as
``stopped`` by the user instead of failing with "received SIGTERM".

A file rather than the control socket, because it works wherever the signal does: for a
Slurm job ``srt stop`` runs on a login node while the orchestrator runs on the batch node,
and the job directory is the one thing both see. The orchestrator looks the file up only
when a signal arrived (never before), so a network filesystem's cache of "no such file"
cannot hide it.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import time
from dataclasses import dataclass

import orjson
from pydantic import FiniteFloat

from srt_services.jobdir import reading
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.layout import JobDir, atomic_write


@dataclass(slots=True)
class StopRequest:
    #: ``user@host``
    by: str
    pid: int
    #: wall time it was written
    t: FiniteFloat
    #: the job's cookie when ``srt stop`` knew it (a Slurm job still pending has none yet)
    cookie: str | None = None
    #: ``srt stop --now``
    now: bool = False

    @property
    def who(self) -> str:
        return f"{self.by} (pid {self.pid})"

    def cause(self, signal_name: str) -> StopCause:
        """The job's stop cause once the signal ``srt stop`` sent after writing it arrived."""
        return StopCause(
            StopKind.USER_STOP,
            f"stopped by srt stop from {self.by}",
            signal=signal_name,
            by=self.who,
        )


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid {os.getuid()}"


def write_stop_request(job: JobDir, cookie: str | None, now: bool = False) -> StopRequest:
    request = StopRequest(
        by=f"{_user()}@{socket.gethostname()}",
        pid=os.getpid(),
        t=time.time(),
        cookie=cookie,
        now=now,
    )
    atomic_write(job.stop_request_file, orjson.dumps(request, option=orjson.OPT_INDENT_2))
    return request


def take_stop_request(job: JobDir, cookie: str) -> StopRequest | None:
    """The request for the job with ``cookie``, removed from the directory; ``None`` when
    there is none (or it is unreadable, or for another run of the directory)."""
    try:
        request = reading.read(StopRequest, job.stop_request_file, "a stop request")
    except reading.JobFileError:
        request = None
    clear_stop_request(job)
    if request is None or (request.cookie is not None and request.cookie != cookie):
        return None
    return request


def clear_stop_request(job: JobDir) -> None:
    """Forget a request left by an earlier run (the orchestrator calls it when it starts)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(job.stop_request_file)
