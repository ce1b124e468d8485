"""``srt status`` as text: the table, its head lines, and ``--watch``.

The data comes from :func:`srt_services.app.status.status_rows` (the same dict
``--json`` prints); this module only decides how it reads. An exit is always written one
way (``3``, or ``signal 15`` for a process a signal ended, whether the launcher saw ``-15``
or the shell's ``143``), and once a job has ended no instance is shown in a state only a
running orchestrator can hold.
"""

from __future__ import annotations

import signal
import sys
import textwrap
import time
from collections.abc import Callable
from typing import Any, TextIO

from srt_services.cli.tables import Column, Step, fit, narrowed_note

#: States an instance can only be in while its orchestrator runs.
LIVE_STATES = frozenset({"pending", "starting", "ready", "unhealthy", "backoff", "stopping"})
#: States in which the instance's process should be running.
RUNNING_STATES = frozenset({"starting", "ready", "unhealthy", "stopping"})


def exit_text(code: int | None) -> str:
    """``3``, ``signal 15`` (from ``-15`` or ``128 + 15``), or ``-`` for none yet.

    srt's own convention (the job's exit status, the launchers) is 128+N after signal N, the
    shell's; a negative code is how Python reports the same. Both read ``signal N``.
    """
    if code is None:
        return "-"
    if code < 0:
        return f"signal {-code}"
    if 128 < code < 128 + 65:
        return f"signal {code - 128}"
    return str(code)


def exit_phrase(code: int | None) -> str:
    """The exit for a sentence: ``exit 3``, ``signal 15 (SIGTERM)``."""
    text = exit_text(code)
    if not text.startswith("signal"):
        return f"exit {text}"
    try:
        return f"{text} ({signal.Signals(int(text.split()[1])).name})"
    except ValueError:
        return text


def job_ended(data: dict[str, Any]) -> bool:
    """The job wrote its result: its orchestrator is done with every instance."""
    return data.get("exit_code") is not None and not data.get("orchestrator_alive")


def shown_state(row: dict[str, Any], ended: bool) -> str:
    """An instance's state as the job left it.

    A service waiting to be restarted when the job ended was never restarted: it is
    ``stopped``, and the note says it was in backoff (the orchestrator writes its last
    in-memory state; see the status data's ``state`` for the raw value).
    """
    state = str(row.get("state") or "?")
    if ended and state in LIVE_STATES:
        return f"stopped (was {state})"
    if state in ("unavailable", "failed") and row.get("reason"):
        return f"{state}: {row['reason']}"
    return state


def _pid_text(row: dict[str, Any], live: bool) -> str:
    pid = row.get("pid")
    if not pid:
        return "-"
    if live and not row.get("running") and row.get("state") in RUNNING_STATES:
        return f"{pid} (gone)"
    if not live and row.get("running"):
        return f"{pid} (still running)"
    return str(pid)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def _relative(job_dir: str) -> Callable[[str], str]:
    prefix = job_dir.rstrip("/") + "/"
    return lambda path: path.removeprefix(prefix)


def head_lines(data: dict[str, Any]) -> list[str]:
    head = f"job {data['job']}: {data['status']}"
    if data["exit_code"] is not None:
        head += f" ({exit_phrase(data['exit_code'])})"
    orch = "running" if data["orchestrator_alive"] else "not running"
    head += f"; orchestrator pid {data['orchestrator_pid']} {orch}"
    lines = [head]
    if data.get("elsewhere"):
        lines.append(f"seen from here: the orchestrator {data['elsewhere']}")
    if data.get("status") == "lost":
        lines.append(
            "its orchestrator is gone without writing a result;"
            f" `srt stop {data['job_dir']}` stops whatever it left"
        )
    if data.get("slurm"):
        s = data["slurm"]
        state = s["state"] or "no longer listed"
        lines.append(f"slurm job {s['job_id']}: {state}; {len(s['steps'])} step(s) running")
    net = data.get("network")
    if net and net["mode"] == "namespaces":
        forwards = "".join(
            f"; 127.0.0.1:{f['port']} -> {f['node']} {f['address']}:{f['port']}"
            for f in net["forwards"]
        )
        lines.append(
            f"local network: namespaces on bridge {net['bridge']} {net['subnet']}{forwards}"
        )
    if data.get("cause"):
        lines.append(f"cause: {data['cause']}")
    return lines


def status_text(data: dict[str, Any], width: int | None) -> str:
    """The head lines and one row per instance, fitted to ``width`` (``None``: in full)."""
    ended = job_ended(data)
    live = bool(data["orchestrator_alive"])
    columns = (
        Column("STEP", cut="end"),
        Column("NODE"),
        Column("STATE", cut="end"),
        Column("PID"),
        Column("PORTS", cut="end"),
        Column("UPTIME"),
        Column("RESTARTS"),
        Column("EXIT"),
        Column("READINESS", cut="end"),
        Column("LOG", short=_relative(data["job_dir"]), cut="middle"),
    )
    rows = [
        (
            r["step"],
            r["node"],
            shown_state(r, ended),
            _pid_text(r, live),
            ",".join(str(p) for p in r.get("ports") or ()) or "-",
            _age(r["uptime"]),
            r["restarts"] or 0,
            exit_text(r["exit_code"]),
            r["readiness"],
            r["log"],
        )
        for r in data["instances"]
    ]
    steps = (
        Step("short", "LOG"),
        Step("drop", "READINESS"),
        Step("drop", "PORTS"),
        Step("drop", "UPTIME"),
        Step("drop", "NODE"),
        Step("drop", "LOG"),
    )
    fitted = fit(columns, rows, width, steps)
    lines: list[str] = []
    for line in head_lines(data):
        lines += _wrap(line, width)
    lines += fitted.lines
    lines += narrowed_note(fitted, "`srt status --json` has every field", width)
    lines += section_lines(data.get("sections") or (), width)
    return "".join(line + "\n" for line in lines)


def section_lines(sections: Any, width: int | None) -> list[str]:
    """The plugins' sections below the table: a heading, then its lines indented."""
    out: list[str] = []
    for section in sections:
        if "error" in section:
            out += _wrap(
                f"({section['plugin']}: its status section failed: {section['error']})", width
            )
            continue
        out += ["", f"{section['title']}:"]
        for line in section["lines"]:
            out += _wrap(f"  {line}", width)
    return out


def _wrap(text: str, width: int | None) -> list[str]:
    if width is None or len(text) <= width:
        return [text]
    return textwrap.wrap(
        text, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    )


# --------------------------------------------------------------------------- --watch


def change_lines(
    before: dict[str, tuple[str, ...]], data: dict[str, Any], clock: str
) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """One line per instance (and for the job) whose shown state changed since ``before``."""
    ended = job_ended(data)
    now: dict[str, tuple[str, ...]] = {}
    lines = []
    for r in data["instances"]:
        parts = [shown_state(r, ended)]
        if r.get("pid"):
            parts.append(f"pid {r['pid']}")
        if r.get("exit_code") is not None:
            parts.append(exit_phrase(r["exit_code"]))
        if r.get("restarts"):
            parts.append(f"restarts {r['restarts']}")
        now[r["step"]] = tuple(parts)
    job = [str(data["status"])]
    if data["exit_code"] is not None:
        job.append(exit_phrase(data["exit_code"]))
    if data.get("cause"):
        job.append(f"cause: {data['cause']}")
    now[""] = tuple(job)
    for key, shown in now.items():
        if before.get(key) != shown:
            what = f"job {data['job']}" if key == "" else key
            lines.append(f"{clock} {what}: {', '.join(shown)}")
    return lines, now


def watch_lines(read: Callable[[], dict[str, Any]], out: TextIO, period: float = 0.5) -> None:
    """For a pipe: a line per change until the job ends (no screen redraws to parse)."""
    seen: dict[str, tuple[str, ...]] = {}
    while True:
        data = read()
        lines, seen = change_lines(seen, data, time.strftime("%H:%M:%S"))
        for line in lines:
            out.write(line + "\n")
        out.flush()
        if not data["orchestrator_alive"]:
            return
        time.sleep(period)


def watch_table(read: Callable[[], dict[str, Any]], period: float = 0.5) -> None:
    """For a terminal: the table redrawn in place until the job ends."""
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    console = Console()

    def view(data: dict[str, Any]) -> Text:
        text = status_text(data, console.width).rstrip("\n")
        return Text(text, no_wrap=True, overflow="ellipsis")

    with Live(view(read()), console=console, auto_refresh=False) as live:
        while True:
            data = read()
            live.update(view(data), refresh=True)
            if not data["orchestrator_alive"]:
                return
            time.sleep(period)


def watch(read: Callable[[], dict[str, Any]], out: TextIO | None = None) -> None:
    out = sys.stdout if out is None else out
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        watch_table(read)
    else:
        watch_lines(read, out)
