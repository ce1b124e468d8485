"""Job commands: run a recipe here, see a job's state, stop it."""

from __future__ import annotations

import math
import sys
from typing import Any

import rich_click as click

from srt_services.cli.job_args import JOB_DIR, complete_unit, root_option


class Seconds(click.FloatRange):
    """A number of seconds in a range; ``nan`` and ``inf`` are refused (a NaN compares
    false with both bounds, so a plain FloatRange lets it through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number


@click.command()
@click.argument("recipe", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--job-dir",
    type=click.Path(file_okay=False),
    help="Job directory (default: <job root>/<name>-<time>).",
)
@root_option
@click.option(
    "--nodes",
    type=click.IntRange(1, 254),
    help="Virtual nodes (node i binds 127.0.0.(i+1)); default: what the recipe needs.",
)
@click.option(
    "--local-network",
    type=click.Choice(["auto", "shared", "namespaces"]),
    help="How the virtual nodes are networked: `shared` (all on 127.0.0.x), `namespaces`"
    " (a network namespace each on a private bridge, as separate machines; needs root) or"
    " `auto` (namespaces only when wildcard binds would collide). Default: the site's"
    " [local] network, else auto.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the outcome.")
@click.option("--plain", is_flag=True, default=None, help="One line per event, even on a terminal.")
@click.option(
    "--grace",
    type=Seconds(0, 3600),
    help="Override every SIGTERM-to-SIGKILL grace (seconds).",
)
@click.option(
    "--launcher",
    default="local",
    hidden=True,
    help="Launcher plugin (the sbatch script passes slurm).",
)
@click.option(
    "--variant",
    metavar="SELECTOR",
    help="The job of another tool's sweep file to run (srtctl's selectors, e.g."
    " zip_override_tp[1]); required when the file holds several.",
)
@click.option(
    "-d",
    "--detach",
    is_flag=True,
    help="Start the job in the background: print its directory and return once it is up.",
)
def run(
    recipe: str,
    job_dir: str | None,
    nodes: int | None,
    local_network: str | None,
    quiet: bool,
    plain: bool | None,
    grace: float | None,
    launcher: str,
    variant: str | None,
    detach: bool,
) -> None:
    """Run a recipe on this machine and supervise it until it ends.

    Phases start in order (infra, before_workers, workers, frontend, after_frontend,
    benchmark); Ctrl-C stops everything (twice: at once). The exit status is the
    benchmark's or the terminal services' worst, 1 for a failed job, 128+N after signal N.

    With -d the job runs on after the shell is gone, its orchestrator watched: if the
    orchestrator dies (kill -9), the watchdog stops its services within their stop graces.
    `srt status`, `srt logs -f` and `srt stop` work on it as on any job; the orchestrator's
    own output is `srt logs JOBDIR orchestrator`.
    """
    from srt_services.app import compose
    from srt_services.app.run import RunRequest, run_job

    request = RunRequest(
        recipe=recipe,
        job_dir=job_dir,
        nodes=nodes,
        local_network=local_network,
        launcher=launcher,
        grace=grace,
        variant=variant,
    )
    if detach:
        raise SystemExit(_detached(compose.setup(), request))
    from srt_services.cli.progress import make_progress
    from srt_services.cli.run_views import summary

    progress = make_progress(quiet, plain)

    def note(message: str) -> None:
        progress({"event": "note", "detail": message})

    try:
        result = run_job(compose.setup(), request, progress, note)
    finally:
        progress.close()
    summary(result)
    raise SystemExit(result.code)


def _detached(where: Any, request: Any) -> int:
    """``srt run -d``: the job directory on stdout (for scripts), the rest on stderr."""
    from srt_services.app.detach import start

    started = start(where, request)
    if started.code is not None:
        sys.stderr.write(f"srt run: the job ended before it was up (exit {started.code}):\n")
        sys.stderr.write("".join(f"  {line}\n" for line in started.output))
        click.echo(started.job_dir)
        return started.code or 1
    pid = started.orchestrator_pid
    up = f"orchestrator pid {pid}" if pid is not None else "still starting"
    sys.stderr.write(
        f"srt run: detached ({up}, watchdog pid {started.watchdog_pid});"
        f" srt status / logs -f / stop {started.job_dir}\n"
    )
    click.echo(started.job_dir)
    return 0


def pick_job_dir(job_dir: str | None, command: str) -> str:
    """``job_dir``, or the latest job under the job root (said on stderr)."""
    if job_dir is not None:
        return job_dir
    from srt_services.jobdir.catalog import latest_job
    from srt_services.jobdir.layout import job_root

    latest = latest_job()
    if latest is None:
        raise click.UsageError(
            f"no job directories under {job_root()}: give JOBDIR (or --root / SRT_JOB_ROOT)"
        )
    sys.stderr.write(f"srt {command}: latest job: {latest}\n")
    return latest


@click.command()
@click.argument("job_dir", required=False, type=JOB_DIR)
@root_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Follow the job until it ends (Ctrl-C to leave): the table redrawn on a terminal,"
    " a line per change in a pipe.",
)
def status(job_dir: str | None, as_json: bool, watch: bool) -> None:
    """Show every instance of a job (running or ended): state, PID, uptime, readiness, log.

    Without JOBDIR: the latest job under the job root (--root, $SRT_JOB_ROOT, else
    ~/.local/state/srt/jobs), named on stderr; JOBDIR may be a job's name under it. On a
    terminal the table fits its width (the log path relative to the job directory, less
    useful columns left out); in a pipe every column is printed in full.
    """
    from srt_services.app import compose
    from srt_services.app.status import status_rows

    job_dir = pick_job_dir(job_dir, "status")
    plugins = compose.setup().plugins

    if watch:
        if as_json:
            raise click.UsageError("--watch prints text; poll --json for a document")
        from srt_services.cli.status_views import watch as follow

        follow(lambda: status_rows(job_dir, plugins))
        return
    data = status_rows(job_dir, plugins)
    if as_json:
        import json

        click.echo(json.dumps(data, indent=2))
        return
    from srt_services.cli.status_views import status_text
    from srt_services.cli.tables import terminal_width

    sys.stdout.write(status_text(data, terminal_width()))


@click.command()
@click.argument("job_dir", type=JOB_DIR)
@click.argument("service", required=False, shell_complete=complete_unit)
@root_option
@click.option("--now", is_flag=True, help="Skip the graces: SIGKILL at once.")
@click.option(
    "--timeout",
    type=Seconds(0, 3600),
    help="Grace to give each tier (default: the plan's).",
)
@click.option(
    "--force",
    is_flag=True,
    help="With SERVICE: stop a critical unit too, and keep the job running without it.",
)
def stop(job_dir: str, service: str | None, now: bool, timeout: float | None, force: bool) -> None:
    """Stop a job from another shell (recorded as stopped by you); also cleans up after an
    orchestrator that was killed.

    With SERVICE, stop only that non-critical service (or one instance's step): the job
    keeps running and the service stays down until `srt restart JOBDIR SERVICE`.
    """
    if service is not None:
        if now or timeout is not None:
            raise click.UsageError("--now and --timeout stop a whole job, not one service")
        from srt_services.cli.control_cmds import ask_orchestrator

        raise SystemExit(ask_orchestrator("stop", job_dir, service, force, True))
    if force:
        raise click.UsageError("--force goes with SERVICE")
    from srt_services.app.stop import StopRequest, stop_job

    code = stop_job(
        StopRequest(job_dir, now=now, timeout=timeout),
        log=lambda m: sys.stderr.write(f"srt stop: {m}\n"),
    )
    raise SystemExit(code)


def _list_command(name: str, alias_of: str | None = None) -> click.Command:
    """``srt ps`` and its alias ``srt jobs`` (one command, two names)."""

    @click.command(name)
    @root_option
    @click.option("-n", "--last", type=click.IntRange(1), help="Only the newest N jobs.")
    @click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
    def command(last: int | None, as_json: bool) -> None:
        from srt_services.app.jobs import job_rows

        data = job_rows()
        if last is not None:
            data["jobs"] = data["jobs"][:last]
        if as_json:
            import json

            click.echo(json.dumps(data, indent=2))
            return
        if not data["jobs"]:
            sys.stderr.write(f"no jobs under {data['root']}\n")
            return
        from srt_services.cli.job_list_views import jobs_text
        from srt_services.cli.tables import terminal_width

        sys.stdout.write(jobs_text(data, terminal_width()))

    command.help = (
        f"The same as `srt {alias_of}`."
        if alias_of
        else "List the jobs under the job root, newest first: state, start, duration, exit"
        " status, node count and Slurm job id.\n\nA job whose orchestrator died without"
        " writing its result reads `lost`, as in `srt status` (`srt stop JOBDIR` cleans up"
        " after it); a Slurm job not yet started reads `pending`."
    )
    return command


ps = _list_command("ps")
jobs = _list_command("jobs", alias_of="ps")
