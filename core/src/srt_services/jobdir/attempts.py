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
    last_exit: dict[str, int | None] = {}
    reason: dict[str, str] = {}
    runs = 0
    for ev in events:
        kind = ev.get("event")
        if kind == "job_started":
            runs += 1
            last_exit.clear()
            reason.clear()
        elif kind == "exited" and isinstance(ev.get("step"), str):
            code = ev.get("code")
            last_exit[ev["step"]] = code if isinstance(code, int) else None
        elif kind == "restarting" and isinstance(ev.get("step"), str):
            reason.setdefault(ev["step"], "policy")
        elif kind == "control_request" and ev.get("op") == "restart":
            for step in ev.get("steps") or ():
                if isinstance(step, str):
                    reason[step] = f"srt restart from {ev.get('by', '?')}"
        elif kind == "launched" and isinstance(ev.get("step"), str):
            step = ev["step"]
            number = ev.get("attempt")
            number = number if isinstance(number, int) else len(out.get(step, ())) + 1
            offset, pid, t = ev.get("offset"), ev.get("pid"), ev.get("t")
            why = ""
            if number == 1 and runs > 1:
                why = "a new srt run in this job directory"
            elif number > 1:
                told = reason.get(step, "")
                after = exit_words(last_exit.get(step))
                why = (
                    f"restarted by {told}"
                    if told.startswith("srt restart")
                    else f"restarted after {after}"
                )
            reason.pop(step, None)
            out.setdefault(step, []).append(
                Attempt(
                    step,
                    number,
                    offset if isinstance(offset, int) and offset >= 0 else None,
                    float(t) if isinstance(t, int | float) else 0.0,
                    pid if isinstance(pid, int) else None,
                    why,
                )
            )
    return out
