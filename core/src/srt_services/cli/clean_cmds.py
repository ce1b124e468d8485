"""``srt rm`` and ``srt prune``: remove job directories whose job is over."""

from __future__ import annotations

import re
import sys

import rich_click as click

from srt_services.cli.job_args import JOB_DIR, root_option

_AGE = re.compile(r"(\d+(?:\.\d+)?)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_age(text: str) -> float:
    """``90s``, ``30m``, ``12h``, ``7d``, ``2w``: seconds."""
    m = _AGE.fullmatch(text.strip())
    if m is None:
        raise click.BadParameter(
            f"{text!r} is not a duration: a number and a unit, s m h d or w (7d, 12h)",
            param_hint="--older-than",
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


@click.command()
@click.argument("job_dirs", nargs=-1, required=True, type=JOB_DIR, metavar="JOBDIR...")
@root_option
@click.option(
    "-f",
    "--force",
    is_flag=True,
    help="Stop a job that still runs (as srt stop does: graces, then SIGKILL), then remove it.",
)
def rm(job_dirs: tuple[str, ...], force: bool) -> None:
    """Remove job directories (logs, events, state) whose job is over.

    A job that still runs (its orchestrator, any process of it, or its Slurm job) is
    refused unless --force, which stops it first. A directory that is not a job directory
    is never removed. JOBDIR may be a job's name under the job root.
    """
    from srt_services.app.clean import remove

    def note(message: str) -> None:
        sys.stderr.write(f"srt rm: {message}\n")

    code = 0
    for job_dir in job_dirs:
        done = remove(job_dir, force, log=note)
        if done.ok:
            click.echo(f"removed {done.job_dir}")
        else:
            sys.stderr.write(f"srt rm: {done.job_dir}: {done.text}\n")
            code = 1
    raise SystemExit(code)


@click.command()
@click.option(
    "--older-than",
    "older_than",
    required=True,
    metavar="AGE",
    help="Remove jobs that ended (or started, if they never ended) more than AGE ago: 12h, 7d, 2w.",
)
@root_option
@click.option("-n", "--dry-run", is_flag=True, help="Only list what would be removed.")
def prune(older_than: str, dry_run: bool) -> None:
    """Remove the job directories under the job root older than AGE.

    Jobs that still run are never touched (listed on stderr, with why); use `srt stop`
    or `srt rm --force` for them. Exit status 0 unless a directory could not be removed.
    """
    from srt_services.app.clean import prune as prune_jobs

    age = parse_age(older_than)
    done = prune_jobs(None, age, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    for path in done.removed:
        click.echo(f"{verb} {path}")
    failed = False
    for path, why in done.kept:
        sys.stderr.write(f"srt prune: kept {path}: {why}\n")
        failed = failed or "cannot remove" in why
    raise SystemExit(1 if failed else 0)
