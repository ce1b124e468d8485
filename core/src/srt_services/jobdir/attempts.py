"""Each launch of each instance, from ``events.jsonl``: when, with which PID, where its
output starts in the instance's log, and why it was started again.

An instance's log is appended to across restarts (and across runs of ``srt run`` in the
same directory), so the ``launched`` event's ``offset`` (the log's size when the attempt
opened it) is where that attempt's output begins: ``srt logs`` marks each attempt there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from srt_services.jobdir.cause import death_signal


@dataclass(frozen=True, slots=True)
class Attempt:
    step: str
    #: 1, 2, ... within one run of the job
    number: int
    #: the log's size when this attempt started (``None`` in events of older versions)
    offset: int | None
    #: wall time of the launch
    t: float
    pid: int | None
    #: why it started: ``""`` for a job's first start, else the restart's reason in words
    why: str


def exit_words(code: int | None) -> str:
    if code is None:
        return "an exit"
    sig = death_signal(code)
    return f"signal {sig}" if sig is not None else f"exit {code}"


def attempts_by_step(events: Iterable[dict[str, Any]]) -> dict[str, list[Attempt]]:
    """step -> its attempts, in launch order."""
    out: dict[str, list[Attempt]] = {}
    # since the last launch of each step: its exit code, and who asked for the restart
    last_exit: dict[str, int | None] = {}
    reason: dict[str, str] = {}
    runs = 0
    for ev in events:
        kind = ev.get("event")
        step = ev.get("step")
        if kind == "job_started":
            runs += 1
            last_exit.clear()
            reason.clear()
        elif kind == "control_request" and ev.get("op") == "restart":
            _restart_requested(ev, reason)
        elif not isinstance(step, str):
            continue
        elif kind == "exited":
            code = ev.get("code")
            last_exit[step] = code if isinstance(code, int) else None
        elif kind == "restarting":
            reason.setdefault(step, "policy")
        elif kind == "launched":
            attempts = out.setdefault(step, [])
            told = reason.pop(step, "")
            attempts.append(_attempt(ev, step, len(attempts), runs, told, last_exit.get(step)))
    return out


def _restart_requested(ev: dict[str, Any], reason: dict[str, str]) -> None:
    """``srt restart`` asked for the steps of ``ev``: that is why they start again."""
    for step in ev.get("steps") or ():
        if isinstance(step, str):
            reason[step] = f"srt restart from {ev.get('by', '?')}"


def _attempt(
    ev: dict[str, Any], step: str, earlier: int, runs: int, told: str, code: int | None
) -> Attempt:
    """The attempt a ``launched`` event records, after ``earlier`` ones of its step, in the
    ``runs``-th run of the job; ``told`` and ``code`` say why it was started again."""
    number = ev.get("attempt")
    number = number if isinstance(number, int) else earlier + 1
    offset, pid, t = ev.get("offset"), ev.get("pid"), ev.get("t")
    return Attempt(
        step,
        number,
        offset if isinstance(offset, int) and offset >= 0 else None,
        float(t) if isinstance(t, int | float) else 0.0,
        pid if isinstance(pid, int) else None,
        _why(number, runs, told, code),
    )


def _why(number: int, runs: int, told: str, code: int | None) -> str:
    if number == 1 and runs > 1:
        return "a new srt run in this job directory"
    if number > 1:
        if told.startswith("srt restart"):
            return f"restarted by {told}"
        return f"restarted after {exit_words(code)}"
    return ""
