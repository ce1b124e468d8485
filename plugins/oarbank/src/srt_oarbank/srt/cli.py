"""``srt oarbank``: expose an srt service as a protocol-1 module; check an executable."""

from __future__ import annotations

import sys

import rich_click as click


@click.group()
def oarbank() -> None:
    """Service protocol 1: expose srt services to an oarbank agent, check module executables."""


@oarbank.command()
@click.argument("recipe", type=click.Path(exists=True, dir_okay=False))
@click.option("--service", required=True, help="The recipe's service to expose.")
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(file_okay=False),
    help="Bundle directory to write.",
)
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    help="Address the service binds ({node_ip}).",
)
@click.option("--module", help="Module name in the manifest (default srt-<service>).")
def expose(recipe: str, service: str, out: str, address: str, module: str | None) -> None:
    """Write a module bundle whose executable runs SERVICE (any srt kind, e.g. etcd) and
    answers fingerprint, start, stop, status, ready, list_owned and destroy."""
    from srt_oarbank.srt.expose import ExposeError, write_bundle

    try:
        executable = write_bundle(recipe, service, out, address, module)
    except ExposeError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(executable)


@oarbank.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def check(args: tuple[str, ...]) -> None:
    """Run the protocol's conformance checks against an executable:
    `srt oarbank check [--bundle DIR] [--tap|--junit FILE] [--probe] EXEC [ARGS...]`.

    Every MUST of the spec is a numbered check (SP-001...); exit 0 only when none failed.
    Destructive: it starts, stops and destroys what the executable manages."""
    from srt_oarbank.conformance.cli import main

    sys.exit(main(list(args)))
