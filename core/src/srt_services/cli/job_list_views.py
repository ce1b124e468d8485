"""``srt ps`` as text: one line per job, newest first (the data is
:func:`srt_services.app.jobs.job_rows`, which ``--json`` prints)."""

from __future__ import annotations

import os
import time
from typing import Any

from srt_services.cli.status_views import exit_text
from srt_services.cli.tables import Column, Step, fit, narrowed_note


def duration_text(seconds: float | None) -> str:
    """``42s``, ``12m03s``, ``3h07m``, ``2d04h``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def _short_when(text: str) -> str:
    return text[5:16] if len(text) == 19 else text  # MM-DD HH:MM


def jobs_text(data: dict[str, Any], width: int | None) -> str:
    columns = (
        Column("JOB", cut="middle"),
        Column("NAME", cut="end"),
        Column("STATE"),
        Column("STARTED", short=_short_when),
        Column("DURATION"),
        Column("EXIT"),
        Column("NODES"),
        Column("SLURM"),
    )
    rows = [
        (
            os.path.basename(r["job_dir"]),
            r["job"],
            r["state"],
            _when(r["started"]),
            duration_text(r["duration"]),
            exit_text(r["exit_code"]),
            r["nodes"],
            r["slurm_job_id"],
        )
        for r in data["jobs"]
    ]
    steps = (
        Step("drop", "NAME"),
        Step("short", "STARTED"),
        Step("drop", "NODES"),
        Step("drop", "SLURM"),
    )
    fitted = fit(columns, rows, width, steps)
    lines = fitted.lines + narrowed_note(fitted, "`srt ps --json` has every field", width)
    return "".join(line + "\n" for line in lines)
