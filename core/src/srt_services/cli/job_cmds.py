"""Job commands: run a recipe here, see a job's state, stop it."""

from __future__ import annotations

import sys

import rich_click as click


@click.command()
@click.argument("recipe", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--job-dir",
    type=click.Path(file_okay=False),
    help="Job directory (default: ./srt-jobs/<name>-<time>).",
)
@click.option(
    "--nodes",
    type=click.IntRange(1, 254),
    help="Virtual nodes (node i binds 127.0.0.(i+1)); default: what the recipe needs.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print only the outcome.")
@click.option("--plain", is_flag=True, default=None, help="One line per event, even on a terminal.")
@click.option(
    "--grace",
    type=click.FloatRange(0, 3600),
    help="Override every SIGTERM-to-SIGKILL grace (seconds).",
)
@click.option(
    "--launcher",
    default="local",
    hidden=True,
    help="Launcher plugin (the sbatch script passes slurm).",
)
def run(
    recipe: str,
    job_dir: str | None,
    nodes: int | None,
    quiet: bool,
    plain: bool | None,
    grace: float | None,
    launcher: str,
) -> None:
    """Run a recipe on this machine and supervise it until it ends.

    Phases start in order (infra, before_workers, workers, frontend, after_frontend,
    benchmark); Ctrl-C stops everything (twice: at once). The exit status is the
    benchmark's or the terminal services' worst, 1 for a failed job, 128+N after signal N.
    """
    from srt_services.supervise.job import RunRequest, run_job

    code = run_job(
        RunRequest(
            recipe=recipe,
            job_dir=job_dir,
            nodes=nodes,
            launcher=launcher,
            quiet=quiet,
            plain=plain,
            grace=grace,
        )
    )
    raise SystemExit(code)


@click.command()
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option(
    "-w",
    "--watch",
    is_flag=True,
    help="Follow the job until it ends (Ctrl-C to leave): the table redrawn on a terminal,"
    " a line per change in a pipe.",
)
def status(job_dir: str, as_json: bool, watch: bool) -> None:
    """Show every instance of a job (running or ended): state, PID, uptime, readiness, log.

    On a terminal the table fits its width (the log path relative to the job directory,
    less useful columns left out); in a pipe every column is printed in full.
    """
    from srt_services.supervise.status import status_rows

    if watch:
        if as_json:
            raise click.UsageError("--watch prints text; poll --json for a document")
        from srt_services.cli.status_views import watch as follow

        follow(lambda: status_rows(job_dir))
        return
    data = status_rows(job_dir)
    if as_json:
        import json

        click.echo(json.dumps(data, indent=2))
        return
    from srt_services.cli.status_views import status_text
    from srt_services.cli.tables import terminal_width

    sys.stdout.write(status_text(data, terminal_width()))


@click.command()
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False))
@click.argument("service", required=False)
@click.option("--now", is_flag=True, help="Skip the graces: SIGKILL at once.")
@click.option(
    "--timeout",
    type=click.FloatRange(0, 3600),
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
    from srt_services.supervise.recovery import stop_job

    code = stop_job(
        job_dir, now=now, timeout=timeout, log=lambda m: sys.stderr.write(f"srt stop: {m}\n")
    )
    raise SystemExit(code)
