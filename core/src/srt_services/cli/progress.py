"""What ``srt run`` shows while a job starts and runs.

On a terminal: a live table (rich) of every instance with its state and how long it has
waited. Otherwise (CI, logs, pipes): one plain line per event, with the time since start.
``--quiet`` prints only the final summary. The display only *reads* events; it never
decides anything, so the three modes behave identically.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

SHOWN = {
    "job_started": "job {job} started (pid {pid}, launcher {launcher})",
    "phase_started": "phase {phase}: {units_text}",
    "launched": "{step} launched on {node} ({pid_text}, attempt {attempt})",
    "launch_failed": "{step} could not be started on {node}: {error}",
    "waiting": "{step} waiting for {probe}",
    "ready": "{step} ready on {node} after {waited:.3f}s",
    "exited": "{step} exited on {node}: {code_text}",
    "restarting": "{step} restarting in {delay:.2f}s (attempt {attempt})",
    "unhealthy": "{step} unhealthy: {detail}",
    "unavailable": "{step} unavailable on {node}, the job runs without it: {reason}",
    "ready_timeout": "{step} not ready in time: {error}",
    "liveness_failed": "{step} liveness check failed ({count}): {error}",
    "external": "{unit} is external at {address} (not launched)",
    "serving": "all phases up; {detail}",
    "stop_requested": "stopping: {detail}",
    "signal": "received {signal}{detail_text}",
    "stopping_tier": "stopping tier {tier}: {steps_text}",
    "escalated": "{who}{detail}",
    "unkillable": "{unkillable_text}",
    "build_started": "building {unit} on {node}",
    "build_done": "built {unit} on {node} in {seconds}s",
    "rev_resolved": "{unit}: source.rev {rev} is commit {commit}",
    "checkout_done": "checked out {unit} at {commit} on {node}",
    "checkout_reused": "reusing the checkout of {unit} at {commit}",
    "job_finished": "job finished with exit code {code}",
    "control_request": "{op} of {unit} asked by {by}: {steps_text}",
    "control_refused": "refused {op} {unit}: {detail}",
    "restarted": "{unit} restarted in {seconds}s{detail_text}",
    "service_stopped": "{unit} stopped on request; it stays down",
    "control_unavailable": "no control socket (srt restart will not work): {detail}",
    "note": "{detail}",
    "job_dir_error": "{detail}",
    "job_dir_recovered": "{detail}",
    "internal_error": "internal error {detail}",
    "orchestrator_lost": "the orchestrator (pid {pid}) died ({code_text}) without ending the job",
    "watchdog_stopped": "the watchdog stopped what the orchestrator (pid {pid}) left",
}


def event_text(record: dict[str, Any]) -> str | None:
    """An event in words (``None``: one the display does not show)."""
    template = SHOWN.get(record["event"])
    if template is None:
        return None
    values = dict(record)
    code, sig = values.get("code"), values.get("signal")
    if code is not None or (sig and record["event"] == "orchestrator_lost"):
        values["code_text"] = f"signal {sig}" if sig else f"code {code}"
    values["units_text"] = ", ".join(values.get("units") or [])
    values["steps_text"] = ", ".join(values.get("steps") or []) or "(escaped processes only)"
    values["detail_text"] = f" ({values['detail']})" if values.get("detail") else ""
    values["who"] = f"{values['step']}: " if values.get("step") else ""
    # an instance its node's agent started reports its PID a moment after the launch
    values["pid_text"] = f"pid {values['pid']}" if values.get("pid") else "by its node's agent"
    values["unkillable_text"] = (
        f"pid {values.get('pid', '?')} could not be killed (state {values.get('state', '?')})"
        if values.get("pid") or not values.get("detail")
        else f"could not be killed: {values['detail']}"
    )
    if values.get("reason") and record["event"] == "exited":
        values["code_text"] = f"{values.get('code_text', '?')} ({values['reason']})"
    values.setdefault("detail", "")
    try:
        return template.format_map(_Default(values))
    except (ValueError, TypeError):
        return f"{record['event']} {record}"


class _Default(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


class SafeStream:
    """A text stream whose writes never raise: once the terminal or pipe behind it is gone
    (EPIPE, EIO after a hang-up, a closed descriptor), it swallows what is written. The job
    must go on, and end with the same status, whether or not anyone still reads."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self._stream.write(text)
            except (OSError, ValueError):
                self.broken = True
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.broken = True

    def isatty(self) -> bool:
        try:
            return not self.broken and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class PlainProgress:
    """One line per event on ``stream``."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.t0 = time.monotonic()
        self.broken = False

    def __call__(self, record: dict[str, Any]) -> None:
        if self.quiet and not (
            record["event"] == "unkillable"
            or (record["event"] == "stop_requested" and record.get("code"))
        ):
            return
        text = event_text(record)
        if text is None or self.broken:
            return
        try:
            self.stream.write(f"[{time.monotonic() - self.t0:8.3f}s] {text}\n")
        except (OSError, ValueError):
            self.broken = True  # the terminal or pipe went away; the job must go on

    def flush(self) -> None:
        """Called by the event log once per event-loop turn (and at the end)."""
        if self.broken:
            return
        try:
            self.stream.flush()
        except (OSError, ValueError):
            self.broken = True

    def close(self) -> None:
        self.flush()


class LiveProgress:
    """A rich live table of instances, refreshed a few times a second."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.live import Live

        # rich writes from its refresh thread too: a hung-up terminal (EIO) must not raise
        # there, nor in ``close``
        self.console = Console(file=SafeStream(sys.stdout))  # type: ignore[arg-type]
        self.rows: dict[str, dict[str, Any]] = {}
        self.messages: list[str] = []
        self.t0 = time.monotonic()
        # started at the first event: a recipe refused before the job starts shows no table
        self.live = Live(
            self._render(), console=self.console, refresh_per_second=4, transient=False
        )
        self.started = False

    def _render(self) -> Any:
        from rich.table import Table

        table = Table(box=None, pad_edge=False, expand=False)
        for col in ("step", "node", "state", "waited", "detail"):
            table.add_column(col)
        now = time.monotonic()
        for step, row in self.rows.items():
            waited = ""
            if row["state"] in {"starting", "waiting"}:
                waited = f"{now - row['since']:.1f}s"
            elif row.get("waited") is not None:
                waited = f"{row['waited']:.3f}s"
            table.add_row(step, row.get("node", ""), row["state"], waited, row.get("detail", ""))
        from rich.console import Group
        from rich.text import Text

        return Group(table, *(Text(m) for m in self.messages[-5:]))

    def __call__(self, record: dict[str, Any]) -> None:
        if not self.started:
            self.started = True
            self.live.start()
        ev = record["event"]
        step = record.get("step")
        if step:
            row = self.rows.setdefault(step, {"state": "pending", "since": time.monotonic()})
            row["node"] = record.get("node", row.get("node", ""))
            if ev == "launched":
                row.update(
                    state="starting", since=time.monotonic(), detail=f"pid {record.get('pid')}"
                )
            elif ev == "waiting":
                row.update(state="waiting", detail=record.get("probe", ""))
            elif ev == "ready":
                row.update(state="ready", waited=record.get("waited"), detail="")
            elif ev == "exited":
                row.update(state="exited", detail=f"code {record.get('code')}")
            elif ev in {
                "restarting",
                "unhealthy",
                "unavailable",
                "ready_timeout",
                "liveness_failed",
                "escalated",
            }:
                row.update(state=ev, detail=event_text(record) or "")
        elif ev in {"stop_requested", "signal", "serving", "phase_started", "unkillable", "note"}:
            text = event_text(record)
            if text:
                self.messages.append(text)
        self.live.update(self._render())

    def close(self) -> None:
        if not self.started:
            return
        try:
            self.live.stop()
        except (OSError, ValueError):
            pass


def make_progress(quiet: bool, plain: bool | None = None) -> Any:
    if quiet:
        return PlainProgress(quiet=True)
    if plain is None:
        plain = not sys.stdout.isatty()
    return PlainProgress() if plain else LiveProgress()
