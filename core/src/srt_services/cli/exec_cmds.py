"""``srt exec``: run a command as one of a job's instances runs."""

from __future__ import annotations

import os
import sys

import rich_click as click

from srt_services.cli.job_args import JOB_DIR, complete_unit, root_option


@click.command("exec", context_settings={"ignore_unknown_options": True})
@click.argument("job_dir", type=JOB_DIR)
@click.argument("service", shell_complete=complete_unit)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@root_option
@click.option("-q", "--quiet", is_flag=True, help="Do not say where the command runs.")
def exec_(job_dir: str, service: str, command: tuple[str, ...], quiet: bool) -> None:
    """Run COMMAND in a running instance's environment, working directory and node:
    `srt exec JOBDIR web -- env`, `srt exec JOBDIR decode_0 -- nvidia-smi`.

    SERVICE is a step, or a service, role or worker with one instance. Locally the command
    gets the instance process's own environment and directory; in a Slurm job it runs as a
    step of the allocation on the instance's node (srun --overlap), inside the instance's
    container image when it has one. The exit status is the command's.
    """
    from srt_services.app import compose
    from srt_services.app.exec import prepare

    todo = prepare(compose.setup(), job_dir, service, command)
    if not quiet:
        sys.stderr.write(f"srt exec: as {todo.where}\n")
        sys.stderr.flush()
    if todo.cwd is not None:
        try:
            os.chdir(todo.cwd)
        except OSError as exc:
            raise click.ClickException(f"cannot enter {todo.cwd}: {exc.strerror}") from None
    try:
        os.execvpe(todo.argv[0], todo.argv, todo.env)  # noqa: S606 - the user's command, as given
    except OSError as exc:
        sys.stderr.write(f"srt exec: cannot execute {todo.argv[0]}: {exc.strerror}\n")
        raise SystemExit(127 if isinstance(exc, FileNotFoundError) else 126) from None
