"""Acting on one service of a running job through its orchestrator's control socket:
``srt restart JOBDIR SERVICE`` (and ``srt stop JOBDIR SERVICE``, which ``job_cmds.stop``
hands over here)."""

from __future__ import annotations

import sys

import rich_click as click

from srt_services.cli.job_args import JOB_DIR, complete_unit, root_option


def ask_orchestrator(op: str, job_dir: str, service: str, force: bool, wait: bool) -> int:
    """Send one request; print its progress on stderr and its outcome; return the exit code."""
    from srt_services.app.control import ServiceRequest, act_on

    def note(text: str) -> None:
        sys.stderr.write(f"srt {op}: {text}\n")

    code = 0
    for outcome in act_on(ServiceRequest(op, job_dir, service, force, wait), note):
        if outcome.ok:
            click.echo(outcome.text)
            continue
        prefix = "refused: " if outcome.refused else ""
        sys.stderr.write(f"srt {op}: {prefix}{outcome.text}\n")
        code = 1
    return code


@click.command()
@click.argument("job_dir", type=JOB_DIR)
@click.argument("service", shell_complete=complete_unit)
@root_option
@click.option(
    "--force",
    is_flag=True,
    help="Restart a critical unit too (its exit would otherwise end the job; the job fails if"
    " it does not come back ready).",
)
@click.option("--no-wait", is_flag=True, help="Return once the orchestrator accepted it.")
def restart(job_dir: str, service: str, force: bool, no_wait: bool) -> None:
    """Restart one service of a running job: stop its instances as the teardown would (stop
    signal, grace, SIGKILL), start them again and wait until they are ready.

    SERVICE is a service (or role) name, one instance's step, a worker (decode_0) or a shell
    pattern ('tick*') matching them, as in `srt logs`. The running orchestrator
    does it, asked through the job directory's control socket (only the job's user may), and
    records it in events.jsonl. The benchmark and terminal services are never restarted on
    their own; a critical unit only with --force.
    """
    raise SystemExit(ask_orchestrator("restart", job_dir, service, force, not no_wait))
