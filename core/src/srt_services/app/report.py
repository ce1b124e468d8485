"""``srt report JOBDIR``'s data: a job's whole life as one page model.

Everything comes from the job directory through the typed readers (``plan.json``,
``state.json``, ``result.json``, ``events.jsonl``) and from the plugins'
``srt_report_sections``; how it looks is :mod:`srt_services.cli.report_page`. The model is
plain data (times in seconds since the job started) so it can be tested without a browser
and the renderer needs no knowledge of srt's files.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from srt_services.contracts.report import ReportSection
from srt_services.jobdir.events import iter_events
from srt_services.jobdir.view import JobView
from srt_services.logview.logfile import open_log
from srt_services.logview.sources import LogSource, all_sources
from srt_services.plugins.manager import PluginSet

#: lines of each failed instance's log tail, and at most this many bytes read for them
TAIL_LINES = 40
TAIL_BYTES = 64 * 1024
#: instance states that make its log worth showing
FAILED_STATES = frozenset({"failed", "unhealthy", "unavailable"})


@dataclass(frozen=True, slots=True)
class Span:
    """One attempt of an instance: launched at ``start``, ready at ``ready`` (``None``:
    never), over at ``end`` (the job's end when it was still running then)."""

    attempt: int
    start: float
    end: float
    ready: float | None = None
    #: exit code (``None``: it did not exit on its own before the record ends)
    code: int | None = None
    signal: int | None = None
    #: it was still running when the record ends (stopped by the teardown or still up)
    open: bool = False
    #: it ended on its own with a non-zero code, before the job was asked to stop (an
    #: attempt the teardown ended is not a failure, whatever its code)
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Mark:
    """A moment on a row (``restart``, ``exit``, ``unhealthy``...) or on the whole job
    (``phase``, ``stop``, ``serving``), with what a reader hovering it should see."""

    t: float
    kind: str
    label: str


@dataclass(slots=True)
class Row:
    """One instance, in plan order."""

    step: str
    unit: str
    node: str
    #: the final state ``state.json`` gives it (``pending`` when it never ran)
    state: str
    restarts: int = 0
    exit_code: int | None = None
    spans: list[Span] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class UnitSummary:
    name: str
    type: str
    category: str
    phase: str
    critical: bool
    nodes: tuple[str, ...]
    ports: tuple[int, ...]
    implied_by: str | None


@dataclass(frozen=True, slots=True)
class LogTail:
    step: str
    state: str
    path: str
    lines: tuple[str, ...]
    #: why it could not be read, if it could not
    error: str | None = None


@dataclass(slots=True)
class Report:
    path: str
    job_name: str
    job_id: str
    #: ``succeeded``, ``failed``, ``stopped``, ``running``, ``lost``...
    status: str
    exit_code: int | None
    #: wall time of the job's start (the timeline's zero) and its length in seconds
    started: float
    duration: float
    cause: str | None
    launcher: str | None
    rows: list[Row]
    #: whole-job marks: phases, serving, the stop and its cause, the end
    marks: list[Mark]
    units: list[UnitSummary]
    nodes: dict[str, str]
    tails: list[LogTail]
    #: (plugin, section) or (plugin, why it failed)
    sections: list[tuple[str, ReportSection | str]]


def build_report(path: str, plugins: PluginSet | None) -> Report:
    """Read the job in ``path`` and its plugins' sections; ``JobDirError`` when it is none."""
    view = JobView.read(path)
    events = _last_run(list(iter_events(view.job.events_file)))
    started = _start(view, events)
    end = _end(view, events, started)
    marks = _job_marks(events, started)
    stop = min((m.t for m in marks if m.kind == "stop"), default=None)
    rows = _rows(view, events, started, end, stop)
    status = _status(view)
    cause = None
    if view.result is not None and view.result.cause is not None:
        cause = view.result.cause.message
    elif view.state is not None and view.state.cause is not None:
        cause = view.state.cause.message
    if cause is not None:
        # the stop_requested event names the cause's kind only: the sentence is the file's
        first = next((n for n, m in enumerate(marks) if m.kind == "stop"), None)
        if first is not None:
            marks[first] = Mark(marks[first].t, "stop", f"stop: {cause}")
    plan = view.plan
    units = [
        UnitSummary(
            u.name,
            u.type,
            u.category,
            u.phase,
            u.critical,
            tuple(dict.fromkeys(i.node for i in u.instances)),
            tuple(p for i in u.instances for p in i.ports),
            u.implied_by,
        )
        for u in (plan.units if plan is not None else [])
    ]
    nodes: dict[str, str] = {}
    if plan is not None:
        for u in plan.units:
            for i in u.instances:
                nodes.setdefault(i.node, i.node_ip)
    sections = plugins.report_sections(view.job.path) if plugins is not None else []
    return Report(
        path=view.job.path,
        job_name=(view.state.job_name if view.state else None)
        or (plan.job_name if plan else None)
        or os.path.basename(view.job.path),
        job_id=(view.state.job_id if view.state else None)
        or (plan.job_id if plan else None)
        or os.path.basename(view.job.path),
        status=status,
        exit_code=view.result.exit_code if view.result is not None else None,
        started=started,
        duration=end,
        cause=cause,
        launcher=view.state.launcher if view.state is not None else None,
        rows=rows,
        marks=marks,
        units=units,
        nodes=nodes,
        tails=_tails(view, rows),
        sections=sections,
    )


def _num(record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _int(record: dict[str, Any], key: str) -> int | None:
    value = record.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _last_run(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events of the directory's latest run (a job directory run again appends to its
    ``events.jsonl``; the files beside it describe the latest run only)."""
    starts = [n for n, e in enumerate(events) if e["event"] == "job_started"]
    return events[starts[-1] :] if starts else events


def _start(view: JobView, events: list[dict[str, Any]]) -> float:
    """The wall time of the job's start: its result, its state, its first event."""
    if view.result is not None:
        return view.result.started
    if view.state is not None:
        return view.state.orchestrator.started
    for e in events:
        t = _num(e, "t")
        if t is not None:
            return t
    return 0.0


def _end(view: JobView, events: list[dict[str, Any]], started: float) -> float:
    """Seconds from the start to the job's end, or to its last event while it runs."""
    if view.result is not None:
        return max(0.0, view.result.ended - started)
    last = max((t for e in events if (t := _num(e, "t")) is not None), default=started)
    return max(0.0, last - started)


def _status(view: JobView) -> str:
    if view.result is not None:
        return view.result.status
    if view.state is None:
        return "planned"
    if view.state.status in {"running", "stopping"} and not view.orchestrator_alive():
        return "lost"
    return view.state.status


def _rows(
    view: JobView, events: Iterable[dict[str, Any]], started: float, end: float, stop: float | None
) -> list[Row]:
    rows = _planned_rows(view)
    spans = _Spans(rows, stop)
    for e in events:
        step = e.get("step")
        t = _num(e, "t")
        if isinstance(step, str) and t is not None and step in rows:
            spans.apply(step, round(t - started, 3), e)  # milliseconds: what the page shows
    for step in list(spans.open):
        spans.close(step, end, None, None, still=True)
    return list(rows.values())


def _planned_rows(view: JobView) -> dict[str, Row]:
    """A row per planned instance (plan order), then any the state adds; final states."""
    rows: dict[str, Row] = {}
    if view.plan is not None:
        for u in view.plan.units:
            for i in u.instances:
                rows[i.step] = Row(i.step, u.name, i.node, "pending")
    if view.state is not None:
        for step, inst in view.state.instances.items():
            row = rows.setdefault(step, Row(step, inst.unit, inst.node, inst.state))
            row.state = inst.state
            row.restarts = inst.restarts
            row.exit_code = inst.exit_code
    return rows


#: events that mean something went wrong with an instance, shown as a mark on its row
_TROUBLE = frozenset({"unhealthy", "ready_timeout", "launch_failed", "liveness_failed"})


class _Spans:
    """Turns an instance's events into its attempts (spans) and marks."""

    def __init__(self, rows: dict[str, Row], stop: float | None) -> None:
        self.rows = rows
        self.stop = stop
        #: step -> the attempt running: (attempt, start, ready)
        self.open: dict[str, tuple[int, float, float | None]] = {}

    def close(self, step: str, t: float, code: int | None, sig: int | None, still: bool) -> None:
        running = self.open.pop(step, None)
        if running is not None:
            attempt, start, ready = running
            failed = code not in (None, 0) and (self.stop is None or t <= self.stop)
            self.rows[step].spans.append(
                Span(attempt, start, max(t, start), ready, code, sig, still, failed)
            )

    def apply(self, step: str, t: float, e: dict[str, Any]) -> None:
        ev = e["event"]
        marks = self.rows[step].marks
        if ev == "launched":
            self.close(step, t, None, None, still=True)
            self.open[step] = (_int(e, "attempt") or 0, t, None)
        elif ev == "ready":
            running = self.open.get(step)
            if running is not None and running[2] is None:
                self.open[step] = (running[0], running[1], t)
            marks.append(Mark(t, "ready", f"ready after {_num(e, 'waited') or 0:.1f}s"))
        elif ev == "exited":
            code, sig = _int(e, "code"), _int(e, "signal")
            self.close(step, t, code, sig, still=False)
            how = f"signal {sig}" if sig else f"code {code}"
            reason = f" ({e['reason']})" if e.get("reason") else ""
            marks.append(Mark(t, "exit", f"exited with {how}{reason}"))
        elif ev == "restarting":
            delay = _num(e, "delay") or 0.0
            marks.append(
                Mark(t, "restart", f"restarting in {delay:.1f}s (attempt {e.get('attempt')})")
            )
        elif ev in _TROUBLE or ev == "unavailable":
            detail = e.get("detail") or e.get("error") or e.get("reason") or ""
            marks.append(Mark(t, "trouble", f"{ev.replace('_', ' ')}: {detail}".rstrip(": ")))


def _job_marks(events: Iterable[dict[str, Any]], started: float) -> list[Mark]:
    marks: list[Mark] = []
    for e in events:
        t = _num(e, "t")
        if t is None:
            continue
        t = round(t - started, 3)  # milliseconds: what the page shows
        ev = e["event"]
        if ev == "phase_started":
            marks.append(Mark(t, "phase", f"phase {e.get('phase', '?')} started"))
        elif ev == "phase_ready":
            marks.append(Mark(t, "phase-ready", f"phase {e.get('phase', '?')} ready"))
        elif ev == "serving":
            marks.append(Mark(t, "serving", "serving"))
        elif ev == "stop_requested":
            cause = e.get("cause")
            why = ""
            if isinstance(cause, dict):
                why = str(cause.get("message") or cause.get("kind") or "")
            marks.append(Mark(t, "stop", f"stop: {why}" if why else "stop"))
        elif ev == "job_finished":
            marks.append(Mark(t, "end", f"job finished (code {e.get('code')})"))
    return marks


def _tails(view: JobView, rows: list[Row]) -> list[LogTail]:
    """The last lines of every instance that failed, or had an attempt fail on its way (a
    restart); not of those the teardown stopped."""
    failed = {
        r.step: r.state for r in rows if r.state in FAILED_STATES or any(s.failed for s in r.spans)
    }
    if not failed:
        return []
    sources, _others = all_sources(view)
    out: list[LogTail] = []
    for source in sources:
        if source.step in failed:
            out.append(_tail(source, failed[source.step], view.job.path))
    return out


def _tail(source: LogSource, state: str, root: str) -> LogTail:
    rel = os.path.relpath(source.path, root)
    step = source.step or source.name
    try:
        fd = open_log(source)
    except Exception as exc:  # missing, or refused (a link out of the job): say why
        return LogTail(step, state, rel, (), f"{type(exc).__name__}: {exc}")
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - TAIL_BYTES)
        data = os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    if start > 0 and lines:
        lines = lines[1:]  # the first may be cut
    return LogTail(step, state, rel, tuple(lines[-TAIL_LINES:]))
