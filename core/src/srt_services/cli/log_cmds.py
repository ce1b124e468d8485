"""``srt logs``: the logs of a job's instances, prefixed, restarts marked, optionally
followed (:mod:`srt_services.logview` does the reading)."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import rich_click as click

from srt_services.cli.job_args import root_option

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_CLOCK = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M")


def parse_since(text: str, now: float | None = None) -> float:
    """``10m``, ``2h``, ``30s``, ``1d`` ago; a date and time; or a time today (``12:30``)."""
    now = time.time() if now is None else now
    value = text.strip()
    m = _DURATION.fullmatch(value)
    if m:
        return now - float(m.group(1)) * _UNITS[m.group(2)]
    for fmt in _CLOCK:
        try:
            return time.mktime(time.strptime(value, fmt))
        except ValueError:
            continue
    for fmt in ("%H:%M:%S", "%H:%M"):
        try:
            clock = time.strptime(value, fmt)
        except ValueError:
            continue
        today = time.localtime(now)
        return time.mktime(
            (today.tm_year, today.tm_mon, today.tm_mday, clock.tm_hour, clock.tm_min,
             clock.tm_sec, 0, 0, -1)
        )  # fmt: skip
    raise click.BadParameter(
        f"{text!r} is not a time: use a duration (30s, 10m, 2h, 1d), a time today (12:30)"
        " or a date and time (2024-05-01 12:30)",
        param_hint="--since",
    )


def split_args(args: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """(JOBDIR or None, the names): the first argument is the job directory when it is one
    (or looks like a path); otherwise every argument is a name in the latest job."""
    from srt_services.cli.job_args import resolve_job_dir
    from srt_services.jobdir.layout import is_job_dir

    if not args:
        return None, []
    found = resolve_job_dir(args[0])
    if os.sep in args[0] or (found is not None and is_job_dir(found)):
        if found is None:
            raise click.BadParameter(f"{args[0]} is not a directory", param_hint="JOBDIR")
        return found, list(args[1:])
    return None, list(args)


def job_over(path: str) -> Callable[[], bool]:
    """Whether the job in ``path`` has ended (nothing more will be written), asked again
    each time; Slurm is asked at most every few seconds."""
    from srt_services.jobdir.layout import JobDirError
    from srt_services.jobdir.view import JobView

    asked = {"at": 0.0, "active": True}

    def over() -> bool:
        if os.path.exists(os.path.join(path, "result.json")):
            return True
        try:
            view = JobView.read(path)
        except JobDirError:
            return True
        if view.state is not None and view.state.finished:
            return True
        job_id = view.slurm_job_id
        if job_id is not None:
            if time.monotonic() - asked["at"] >= 5.0:
                from srt_services.launch.slurm.control import ACTIVE, job_state

                asked["at"] = time.monotonic()
                asked["active"] = job_state(job_id) in ACTIVE
            return not asked["active"]
        return not view.orchestrator_alive()

    return over


@click.command()
@click.argument("args", nargs=-1, metavar="[JOBDIR] [NAME]...")
@root_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new lines until the job ends.")
@click.option(
    "-n",
    "--tail",
    "lines",
    type=click.IntRange(0),
    help="Only the last N lines of each log (before following).",
)
@click.option(
    "--since",
    metavar="TIME",
    help="Only what was written since TIME: 30s, 10m, 2h, 1d ago, 12:30 today, or"
    " '2024-05-01 12:30'. Logs carry no time per line: each log starts at the attempt that"
    " ran at TIME.",
)
@click.option(
    "-t",
    "--timestamps",
    is_flag=True,
    help="Begin each line with when it was written (to 0.25 s; followed lines: when read).",
)
@click.option("--no-prefix", is_flag=True, help="Print the lines without the instance name.")
@click.option("--no-color", is_flag=True, help="No colours, even on a terminal.")
def logs(
    args: tuple[str, ...],
    follow: bool,
    lines: int | None,
    since: str | None,
    timestamps: bool,
    no_prefix: bool,
    no_color: bool,
) -> None:
    """Print the logs of a job's instances, each line prefixed with its instance, each
    restart marked where the new attempt's output begins.

    NAME selects a service or role (all its instances), a step (service_web_0), a worker
    (decode_0), `services` or `workers`, or another file in logs/ (sbatch); shell patterns
    work. Without NAME: every instance. Without JOBDIR: the latest job under the job root
    (named on stderr). The logs are merged in the order their lines were written (srt
    records when each log grew, every 0.25 s); with -f, new lines keep coming as they are
    written, across restarts, truncation and rotation, until the job ends. A line longer
    than 1 MiB is cut there (the line says so); only regular files inside the job directory
    are read (a FIFO, a device or a link out of it is named, not read, and the exit status
    is 1). Works the same for Slurm job directories (the logs are in the shared job
    directory).
    """
    from srt_services.cli.job_cmds import pick_job_dir
    from srt_services.jobdir.attempts import attempts_by_step
    from srt_services.jobdir.events import read_events
    from srt_services.jobdir.view import JobView
    from srt_services.logview.logfile import LogFile
    from srt_services.logview.printer import Printer, use_color
    from srt_services.logview.sources import select

    start = parse_since(since) if since is not None else None
    given, names = split_args(args)
    job_dir = pick_job_dir(given, "logs")
    view = JobView.read(job_dir)
    sources = select(view, names)
    if not sources:
        sys.stderr.write(f"srt logs: {view.job.path} has no instance logs yet\n")
        return
    attempts = attempts_by_step(read_events(view.job.events_file))
    out = sys.stdout.buffer
    color = use_color(out, False if no_color else None)
    printer = Printer(
        out, [s.name for s in sources], prefix=not no_prefix, color=color, timestamps=timestamps
    )
    files = [LogFile(s, list(attempts.get(s.step or "", []))) for s in sources]
    over = job_over(view.job.path)
    following = follow and not over()
    _print_past(files, printer, lines, start, following)
    printer.flush()
    if following:
        from srt_services.logview.follow import follow as follow_logs

        follow_logs(view.job, files, printer, over)
    refused = [f.refused for f in files if f.refused]
    for f in files:
        f.close()
    if refused:
        # said in the output where the log would be; the exit status says it too
        from srt_services.jobdir.layout import JobDirError

        raise JobDirError("not read: " + "; ".join(r for r in refused if r))


def _print_past(
    files: list[Any], printer: Any, lines: int | None, start: float | None, following: bool
) -> None:
    """What the logs hold now, merged by when it was written (one log after the other for
    a job without the logs' size history); the unfinished last lines too unless following.
    Everything streams: a log of any size is read a chunk at a time, never held whole."""
    from srt_services.logview.past import merged_timed, timed

    def pieces_of(f: Any) -> Iterator[Any]:
        yield from f.read_past(lines, start)
        if not following:
            yield from f.flush_partial()

    streams = [timed(f, pieces_of(f)) for f in files]
    if all(stream is not None for stream in streams):
        named = [(f.source.name, st) for f, st in zip(files, streams, strict=True) if st]
        printer.write_merged(merged_timed(named))
        return
    for f in files:
        printer.write(f.source.name, pieces_of(f))
