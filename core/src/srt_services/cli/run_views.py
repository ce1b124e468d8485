"""How ``srt run`` reads on a terminal: its progress, then how the job ended."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from srt_services.jobdir.cause import StopKind

if TYPE_CHECKING:
    from srt_services.app.run import RunResult


def summary(result: RunResult) -> None:
    """Print how the job ended; a closed terminal must not change the exit status."""
    try:
        _summary(result)
    except OSError:
        pass


def _summary(result: RunResult) -> None:
    code = result.code
    cause = result.stop_cause
    message = cause.message if cause is not None else ""
    out = sys.stderr if code else sys.stdout
    if cause is not None and cause.kind is StopKind.USER_STOP:
        out.write(f"srt: job {result.job_name} {message} (exit {code})\n")
    elif code:
        out.write(f"srt: job {result.job_name} failed (exit {code}): {message}\n")
    else:
        out.write(f"srt: job {result.job_name} finished: {message or 'ok'}\n")
    for entry in result.unkillable:
        out.write(f"srt: {entry}\n")
    for tail in result.tails:
        out.write(f"srt: last lines of {tail.log}:\n")
        out.write("".join(f"    {line}\n" for line in tail.lines))
    out.write(f"srt: job directory {result.job_dir}\n")
