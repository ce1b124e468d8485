"""``srt events``: a job's ``events.jsonl`` in words (or as it is), optionally followed."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import rich_click as click

from srt_services.cli.job_args import JOB_DIR, root_option

#: Fields every event has; the rest are the event's own.
_COMMON = ("t", "mono", "event")


def event_line(record: dict[str, Any], start: float | None) -> str:
    """``2024-05-01 12:00:03.120  +3.120s  service_web launched on node0 (pid 4321, ...)``:
    the wall time, the time since the run began (its ``job_started``), what happened."""
    from srt_services.cli.progress import event_text

    t = record.get("t")
    when = "?"
    if isinstance(t, (int, float)):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) + f".{int(t % 1 * 1000):03d}"
    mono = record.get("mono")
    since = f"+{mono - start:.3f}s" if isinstance(mono, (int, float)) and start is not None else "-"
    text = event_text(record)
    if text is None:
        own = " ".join(
            f"{k}={json.dumps(v) if not isinstance(v, str) else v}"
            for k, v in record.items()
            if k not in _COMMON
        )
        text = f"{record['event']} {own}".rstrip()
    return f"{when}  {since:>10}  {text}"


class _Lines:
    """Renders events one by one, each relative to the latest ``job_started`` before it."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.start: float | None = None

    def __call__(self, record: dict[str, Any]) -> str:
        if record["event"] == "job_started" and isinstance(record.get("mono"), (int, float)):
            self.start = record["mono"]
        if self.as_json:
            return json.dumps(record, separators=(",", ":"))
        return event_line(record, self.start)


@click.command()
@click.argument("job_dir", required=False, type=JOB_DIR)
@root_option
@click.option("-f", "--follow", is_flag=True, help="Keep printing new events until the job ends.")
@click.option("-n", "--tail", "last", type=click.IntRange(0), help="Only the last N events.")
@click.option("--json", "as_json", is_flag=True, help="The events as they are, one per line.")
def events(job_dir: str | None, follow: bool, last: int | None, as_json: bool) -> None:
    """Print what happened in a job, in order: launches, readiness, exits, restarts, control
    requests, the stop and its cause (the job directory's events.jsonl).

    Each line: wall time, seconds since the run began, the event in words. --json prints the
    records as they are (JSON Lines). Without JOBDIR: the latest job under the job root.
    With -f, new events are printed as they are written until the job ends.
    """
    from srt_services.cli.job_cmds import pick_job_dir
    from srt_services.cli.log_cmds import job_over
    from srt_services.jobdir.layout import JobDir

    job = JobDir(pick_job_dir(job_dir, "events"))
    render = _Lines(as_json)
    if not follow:
        from srt_services.jobdir.events import read_events

        # every event rendered: a line's start time comes from the job_started before it
        _write(_last([render(r) for r in read_events(job.events_file)], last))
        return
    from srt_services.jobdir.event_tail import follow_events

    batches = follow_events(job.events_file, job_over(job.path))
    _write(_last([render(r) for r in next(batches)], last))
    for batch in batches:
        _write([render(r) for r in batch])


def _last(lines: list[str], last: int | None) -> list[str]:
    if last is None:
        return lines
    return lines[len(lines) - last :] if last else []


def _write(lines: list[str]) -> None:
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()
