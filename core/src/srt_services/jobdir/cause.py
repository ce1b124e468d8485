"""Why a job stopped: the first cause the orchestrator saw, typed.

The cause is decided once (the first one wins) and then written to ``state.json`` and
``result.json`` and carried by the ``stop_requested`` and ``job_finished`` events. On disk
it is a flat JSON object: ``kind`` first, then only the fields that kind sets, then
``message`` (the sentence ``srt run`` and ``srt status`` print)::

    {"kind": "critical_service_exit", "unit": "etcd", "step": "service_etcd",
     "node": "node0", "code": 137, "signal": 9, "message": "critical services[etcd] ..."}
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class StopKind(StrEnum):
    """Every way a job ends; the value is what the files say."""

    #: the benchmark exited (any code: its code is the job's)
    BENCHMARK_EXIT = "benchmark_exit"
    #: the benchmark ran longer than its ``timeout``
    BENCHMARK_TIMEOUT = "benchmark_timeout"
    #: every terminal service has exited (the worst code is the job's)
    TERMINAL_EXIT = "terminal_exit"
    #: a critical unit exited after it was ready (or a terminal critical one failed)
    CRITICAL_SERVICE_EXIT = "critical_service_exit"
    #: an instance exited while its phase waited for it to be ready
    EXITED_BEFORE_READY = "exited_before_ready"
    #: an instance was not ready within its readiness timeout
    READINESS_TIMEOUT = "readiness_timeout"
    #: a port a unit needs is held by a process that is not a leftover of a finished job
    PORT_IN_USE = "port_in_use"
    #: a source checkout or build failed
    BUILD_FAILED = "build_failed"
    #: the plan asked for something the runtime refuses (a file outside its work dir)
    BAD_PLAN = "bad_plan"
    #: ``srt stop JOBDIR``: the user asked for the job to end (``by`` says who and from where)
    USER_STOP = "user_stop"
    #: SIGTERM or SIGINT reached the orchestrator (Ctrl-C, kill, scancel, a time limit);
    #: SIGHUP (a hung-up terminal) does not stop a job
    SIGNAL = "signal"
    #: the launcher could not start the job on its nodes (a node whose srt agent never
    #: started: ``node`` names it)
    LAUNCHER_FAILED = "launcher_failed"
    #: a bug in srt: the orchestrator itself raised
    INTERNAL_ERROR = "internal_error"


def death_signal(code: int) -> int | None:
    """The signal that killed a process whose shell-style exit code is ``code`` (128+N)."""
    return code - 128 if 128 < code < 128 + 65 else None


#: Key order on disk (after ``kind``); ``message`` comes last.
_FIELDS = (
    "unit",
    "step",
    "node",
    "code",
    "signal",
    "reason",
    "timeout",
    "error",
    "detail",
    "by",
)


@dataclass(frozen=True, slots=True)
class StopCause:
    """A stop cause; fields a kind does not use stay ``None`` and are not written."""

    kind: StopKind
    #: the sentence shown to the user
    message: str = ""
    unit: str | None = None
    #: the instance's step; for ``build_failed``, what failed (``source clone``, ``build_command``...)
    step: str | None = None
    node: str | None = None
    #: the exit code of the process that ended the job (``terminal_exit``: the worst one)
    code: int | None = None
    #: the signal number that killed that process, or for kind ``signal`` the name of the
    #: signal the orchestrator received (``SIGTERM``)
    signal: int | str | None = None
    #: why srt itself killed the process (``liveness failed 3 times: ...``)
    reason: str | None = None
    #: the timeout (seconds) that ran out
    timeout: float | None = None
    #: ``internal_error``: the exception
    error: str | None = None
    #: ``port_in_use``: one line per port that is taken
    detail: tuple[str, ...] | None = None
    #: ``user_stop``: who asked (``srt stop`` by user@host, pid N)
    by: str | None = None

    @classmethod
    def process_exit(
        cls,
        kind: StopKind,
        code: int,
        message: str,
        *,
        unit: str | None = None,
        step: str | None = None,
        node: str | None = None,
        reason: str | None = None,
    ) -> StopCause:
        """A cause that is a process's exit: ``signal`` is filled in from ``code``."""
        return cls(
            kind,
            message,
            unit=unit,
            step=step,
            node=node,
            code=code,
            signal=death_signal(code),
            reason=reason,
        )

    def as_json(self, with_message: bool = True) -> dict[str, Any]:
        """The on-disk object (the ``stop_requested`` event carries it without ``message``)."""
        out: dict[str, Any] = {"kind": self.kind.value}
        for name in _FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        if with_message:
            out["message"] = self.message
        return out
