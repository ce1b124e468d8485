"""``state.json``: what runs where, rewritten while the job runs.

It names the orchestrator (PID plus start time, so a reused PID is never mistaken for it)
and the job's cookie, and per instance its PID, process group, start time and state, so
that ``srt status`` and ``srt stop`` (and a later ``srt run`` in the same directory) can
tell what is alive. The orchestrator rewrites it at most once per event-loop turn however
many instances changed.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

import orjson
from pydantic import Field, FiniteFloat

from srt_services import procfs
from srt_services.jobdir import reading
from srt_services.jobdir.cause import StopCause
from srt_services.jobdir.layout import JobDir, atomic_write
from srt_services.procfs import start_ticks

VERSION: Final = 1
#: The highest ``pid_max`` Linux allows: a larger "PID" is a corrupt file, not a process.
PID_MAX = 1 << 22

Pid = Annotated[int, Field(gt=0, le=PID_MAX)]
Ticks = Annotated[int, Field(ge=0, lt=1 << 63)]
Count = Annotated[int, Field(ge=0, lt=1 << 31)]
ExitCode = Annotated[int, Field(ge=-(1 << 31), lt=1 << 31)]

JobStatus = Literal["running", "stopping", "finished", "failed", "stopped"]
#: ``pending`` (not launched yet), ``starting`` (launched, not ready), ``ready``,
#: ``backoff`` (waiting to restart), ``unhealthy`` (gave up restarting), ``stopping``,
#: ``stopped`` (ended by the teardown), ``exited`` (code 0), ``failed`` and
#: ``unavailable`` (what it runs is not on its node: a non-critical service that may be
#: missing there, such as an implied exporter; the job goes on without it).
InstanceStatus = Literal[
    "pending",
    "starting",
    "ready",
    "backoff",
    "unhealthy",
    "stopping",
    "stopped",
    "exited",
    "failed",
    "unavailable",
]


# Not slotted: orjson writes a dataclass with a __dict__ as fast as a dict, and one with
# __slots__ about four times slower (measured: 40 vs 150 us for 200 instances).


@dataclass
class OrchestratorInfo:
    pid: Pid
    start_ticks: Ticks | None
    host: str
    #: wall time the job started
    started: FiniteFloat
    #: the PID namespace and the kernel boot its PIDs belong to: from another namespace,
    #: host or boot they name nothing (``None`` in files written before they were recorded)
    pid_ns: str | None = None
    boot_id: str | None = None

    @classmethod
    def this_process(cls, started: float) -> OrchestratorInfo:
        pid = os.getpid()
        return cls(
            pid,
            start_ticks(pid),
            socket.gethostname(),
            started,
            procfs.pid_namespace(),
            procfs.boot_id(),
        )

    def elsewhere(self) -> str | None:
        """Why this process cannot see the orchestrator's processes, or ``None`` if it can."""
        if self.host != socket.gethostname():
            return f"it runs on host {self.host}, not on {socket.gethostname()}"
        ns = procfs.pid_namespace()
        if self.pid_ns is not None and ns is not None and self.pid_ns != ns:
            return f"it runs in another PID namespace ({self.pid_ns}; this is {ns})"
        boot = procfs.boot_id()
        if self.boot_id is not None and boot is not None and self.boot_id != boot:
            return "the machine has rebooted since it started"
        return None


@dataclass
class SessionRecord:
    """A session (and process group) srt created: its processes are the job's."""

    sid: Pid
    step: str


@dataclass
class InstanceState:
    """One instance; the field order is the file's key order."""

    unit: str
    node: str
    state: InstanceStatus
    pid: Pid | None
    pgid: Pid | None
    start_ticks: Ticks | None
    #: wall time of the current attempt's launch
    started: FiniteFloat | None
    ready_at_mono: FiniteFloat | None
    attempt: Count
    restarts: Count
    exit_code: ExitCode | None
    #: relative to the job directory
    log: str
    #: how readiness is checked, in words (``None``: no readiness check)
    readiness: str | None
    #: launcher data (Slurm: job and step ids)
    extra: dict[str, Any]
    #: why an ``unavailable`` instance is (the line its node's look-up wrote), or why a
    #: ``failed`` one's process said it failed (``srt-exit-reason``), or its node was lost
    reason: str | None = None


@dataclass(slots=True)
class JobState:
    version: Literal[1]
    job_name: str
    job_id: str
    cookie: str
    launcher: str
    status: JobStatus
    phase: str | None
    orchestrator: OrchestratorInfo
    instances: dict[str, InstanceState]
    cause: StopCause | None
    unkillable: list[str]
    #: set by ``srt stop`` when it cleaned up after a dead orchestrator
    stopped_by: str | None = None
    #: the job's cgroup (``None``: the host gave it none); see :mod:`srt_services.launch.cgroup`
    cgroup: str | None = None
    #: sessions srt created on this machine (every attempt and build), for ``srt stop``
    sessions: list[SessionRecord] = field(default_factory=list)
    #: source builds, running or done, by step (``service_x.build``); shown by ``srt status``
    builds: dict[str, InstanceState] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether the job is over (its orchestrator wrote so, or ``srt stop`` did)."""
        return self.status in {"finished", "failed", "stopped"}


def encode_state(state: JobState) -> bytes:
    doc: dict[str, Any] = {
        "version": state.version,
        "job_name": state.job_name,
        "job_id": state.job_id,
        "cookie": state.cookie,
        "launcher": state.launcher,
        "status": state.status,
        "phase": state.phase,
        "orchestrator": state.orchestrator,
        "instances": state.instances,  # dataclasses: orjson writes them natively
        "cause": state.cause.as_json() if state.cause is not None else None,
        "unkillable": state.unkillable,
    }
    if state.stopped_by is not None:
        doc["stopped_by"] = state.stopped_by
    if state.cgroup is not None:
        doc["cgroup"] = state.cgroup
    if state.sessions:
        doc["sessions"] = state.sessions
    if state.builds:
        doc["builds"] = state.builds
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


def write_state(job: JobDir, state: JobState) -> None:
    atomic_write(job.state_file, encode_state(state))


def read_state(job: JobDir) -> JobState | None:
    """The job's state, ``None`` before the orchestrator wrote one; JobFileError if corrupt."""
    return reading.read(JobState, job.state_file, "a valid job state")
