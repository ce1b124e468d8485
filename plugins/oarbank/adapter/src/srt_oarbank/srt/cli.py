"""``srt oarbank``: expose an srt service as a protocol-1 module, check an executable, run
the node agent and talk to it."""

from __future__ import annotations

import json
import sys
from typing import Any

import rich_click as click
from oarbank_protocol.numbers import is_finite_number


class _Finite(click.ParamType):  # type: ignore[type-arg]
    """A finite number (``nan`` and ``inf`` parse as floats but mean nothing here)."""

    name = "number"

    def __init__(self, positive: bool) -> None:
        self.positive = positive

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not is_finite_number(number) or number < 0 or (self.positive and number == 0):
            self.fail(f"{value!r} is not a finite number {'> 0' if self.positive else '>= 0'}")
        return number


@click.group()
def oarbank() -> None:
    """Service protocol 1: expose srt services as modules, check module executables, run
    module bundles on a node with admission."""


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
    `srt oarbank check [--bundle DIR] [--service NAME] [--tap|--junit FILE] [--probe]
    [--spec-only] [--list] [--grant-path DIR] [--grant-network] [--tools FILE]
    [EXEC [ARGS...]]`.

    Every requirement is a numbered check (SP-001...), marked `spec` or `srt schema` (srt's
    rules where the spec is silent); with a manifest in --bundle, its names, exec and
    timeouts are used, and a module that declares a sandbox runs confined with the grants
    the --grant-* options approve (SP-035 names the others). Exit 0 only when none failed.
    Destructive: it starts, stops and
    destroys what the executable manages."""
    from oarbank_protocol.conformance.cli import main

    sys.exit(main(list(args), prog="srt oarbank check"))


@oarbank.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def agent(args: tuple[str, ...]) -> None:
    """Run module bundles on this node and admit work against them:
    `srt oarbank agent --bundle DIR [--bundle DIR...] --node-id ID --data-root DIR
    [--socket PATH] [--mem-budget-gb GB] [--min-free-gb GB] [--psi-limit PERCENT]
    [--no-host-memory] [--live-attempts FILE] [--settings MODULE=FILE]
    [--grant-path DIR] [--grant-network] [--allow-unconfined]`.

    Keeps `always` services up, starts `on_demand` ones for the admissions that need them,
    judges memory by the host's real memory (MemAvailable, PSI) within the budget, stops
    idle `yieldable` ones under memory pressure, runs probes and reaping, and answers
    `srt oarbank admit|release|status|doctor` on its control socket. A module whose manifest
    declares a sandbox runs confined (bubblewrap) with the grants the --grant-* options
    approve, and is refused when it asks for more. SIGTERM stops every service through the
    protocol; SIGHUP runs a doctor."""
    from oarbank_protocol.agent.node import main

    sys.exit(main(list(args), prog="srt oarbank agent"))


socket_option = click.option(
    "--socket",
    "socket_path",
    required=True,
    type=click.Path(dir_okay=False),
    help="The agent's control socket.",
)


def _call(socket_path: str, payload: dict[str, Any], timeout: float | None = None) -> None:
    from pathlib import Path

    from oarbank_protocol.agent.control import request

    try:
        answer = request(Path(socket_path), payload, timeout)
    except (OSError, ValueError) as exc:
        raise click.ClickException(f"cannot reach the agent at {socket_path}: {exc}") from None
    click.echo(json.dumps(answer, indent=2, sort_keys=True))
    if not answer.get("ok"):
        sys.exit(75 if answer.get("retryable") else 1)


@oarbank.command()
@socket_option
@click.option("--attempt", required=True, help="The attempt (job stage) id.")
@click.option(
    "--need", "needs", multiple=True, help="A capability: module/service or module/probe."
)
@click.option("--pool", "pools", multiple=True, help="Reserve tokens: module/pool=N.")
@click.option("--needs-pool", "needs_pools", multiple=True, help="Require a pool to exist.")
@click.option(
    "--mem-gb",
    type=_Finite(positive=False),
    default=0.0,
    show_default=True,
    help="The job's own memory.",
)
@click.option(
    "--timeout",
    type=_Finite(positive=True),
    help="Give up waiting for the services after this long.",
)
def admit(
    socket_path: str,
    attempt: str,
    needs: tuple[str, ...],
    pools: tuple[str, ...],
    needs_pools: tuple[str, ...],
    mem_gb: float,
    timeout: float | None,
) -> None:
    """Admit an attempt: check capabilities, pool tokens and host memory before anything
    starts, then wait until the services it needs are ready. Exit 0 admitted, 75 refused for
    now (retryable: tokens or memory), 1 refused."""
    wanted: dict[str, int] = {}
    for item in pools:
        name, sep, count = item.rpartition("=")
        if not sep or not count.isdigit():
            raise click.BadParameter(f"{item!r}: expected module/pool=N", param_hint="--pool")
        wanted[name] = int(count)
    payload: dict[str, Any] = {
        "op": "admit",
        "attempt_id": attempt,
        "needs": list(needs),
        "pools": wanted,
        "needs_pools": list(needs_pools),
        "mem_gb": mem_gb,
    }
    if timeout is not None:
        payload["timeout_s"] = timeout
    _call(socket_path, payload)


def _pools(pools: tuple[str, ...]) -> dict[str, int]:
    wanted: dict[str, int] = {}
    for item in pools:
        name, sep, count = item.rpartition("=")
        if not sep or not count.isdigit():
            raise click.BadParameter(f"{item!r}: expected module/pool=N", param_hint="--pool")
        wanted[name] = int(count)
    return wanted


@oarbank.command("run", context_settings={"ignore_unknown_options": True})
@socket_option
@click.option(
    "--attempt",
    help="The attempt id (default: this srt instance's, srt.<job id>.<step>).",
)
@click.option(
    "--need", "needs", multiple=True, help="A capability: module/service or module/probe."
)
@click.option("--pool", "pools", multiple=True, help="Reserve tokens: module/pool=N.")
@click.option("--needs-pool", "needs_pools", multiple=True, help="Require a pool to exist.")
@click.option("--mem-gb", type=_Finite(positive=False), default=0.0, help="The command's memory.")
@click.option(
    "--timeout", type=_Finite(positive=True), help="Give up waiting for the services after this."
)
@click.option(
    "--reason-file",
    type=click.Path(dir_okay=False),
    help="Also write a refusal's reason here (srt's srt-exit-reason: a `uses:` wrapper).",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_cmd(
    socket_path: str,
    attempt: str | None,
    needs: tuple[str, ...],
    pools: tuple[str, ...],
    needs_pools: tuple[str, ...],
    mem_gb: float,
    timeout: float | None,
    reason_file: str | None,
    command: tuple[str, ...],
) -> None:
    """Run COMMAND inside an admission: admitted before it starts (on_demand services started
    and waited for), released when it ends. Refused: exit 75 (retryable) or 1 with the
    protocol's reason, COMMAND never runs. Otherwise COMMAND's exit status; it sees
    OARBANK_ATTEMPT_ID."""
    import os
    from pathlib import Path

    from srt_services.extend import processes

    from srt_oarbank.srt.using import default_attempt, run_admitted

    instance = attempt is None
    attempt = attempt or default_attempt(os.environ, processes.INSTANCE_VAR)
    if attempt is None:
        raise click.UsageError("--attempt is required outside an srt job")
    admission: dict[str, Any] = {
        "attempt_id": attempt,
        "needs": list(needs),
        "pools": _pools(pools),
        "needs_pools": list(needs_pools),
        "mem_gb": mem_gb,
    }
    if timeout is not None:
        admission["timeout_s"] = timeout
    argv = list(command[1:] if command and command[0] == "--" else command)
    if not argv:
        raise click.UsageError("no command to run")
    reason = Path(reason_file) if reason_file else None
    sys.exit(
        run_admitted(Path(socket_path), admission, argv, reason_file=reason, release_stale=instance)
    )


@oarbank.command()
@socket_option
@click.option("--attempt", required=True, help="The attempt to release.")
def release(socket_path: str, attempt: str) -> None:
    """Release an attempt's capabilities, tokens and memory (idempotent)."""
    _call(socket_path, {"op": "release", "attempt_id": attempt}, 30)


@oarbank.command()
@socket_option
def status(socket_path: str) -> None:
    """Every module's services, probes, pools, admissions and the memory budget."""
    _call(socket_path, {"op": "status"}, 30)


@oarbank.command()
@socket_option
def doctor(socket_path: str) -> None:
    """Re-run every probe and service fingerprint now and show each capability."""
    _call(socket_path, {"op": "doctor"})
