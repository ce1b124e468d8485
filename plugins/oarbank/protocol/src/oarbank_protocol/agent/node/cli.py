"""The node agent's program: command line, signals, the control socket, exit status.

SIGTERM/SIGINT: every started service is stopped through the protocol (with the P11
escalation), owned objects of attempts that are not live are reaped and checked gone; exit
0 when nothing is left, 1 otherwise. A second signal exits at once (services are adopted
by the next agent). SIGHUP: a doctor run. Exit 2: usage or bundle error; 4: another agent
holds a state file.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from oarbank_protocol.agent import control
from oarbank_protocol.agent.node.agent import NodeAgent, NodeAgentConfig
from oarbank_protocol.agent.node.requests import answer
from oarbank_protocol.agent.process import setup_logging, stop_on_signals
from oarbank_protocol.agent.site import add_site_arguments, site_from_args
from oarbank_protocol.errors import ManifestError, StateLocked
from oarbank_protocol.execution.environment import SAFE_PATH, load_json_file
from oarbank_protocol.lifecycle.host_memory import HostLimits
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.numbers import amount_arg, seconds_arg

log = logging.getLogger("oarbank_protocol.agent.node")

#: How usage messages name the program; a host passes its own (``srt oarbank agent``).
PROG = "python -m oarbank_protocol.agent.node"

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_LOCKED = 4


def _settings_arg(value: str) -> tuple[str, Path]:
    module, sep, path = value.partition("=")
    if not sep or not module or not path:
        raise argparse.ArgumentTypeError("expected MODULE=FILE")
    return module, Path(path)


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run module bundles on this node and admit work against them.",
    )
    parser.add_argument("--bundle", type=Path, action="append", required=True, metavar="DIR")
    parser.add_argument("--node-id", required=True, help="this node's id (OARBANK_NODE_ID)")
    parser.add_argument(
        "--data-root", type=Path, required=True, help="module data dirs: DIR/<module>"
    )
    parser.add_argument("--state-dir", type=Path, help="state files (default: DATA_ROOT/.state)")
    parser.add_argument(
        "--socket", type=Path, help="control socket (default: STATE_DIR/agent.sock)"
    )
    parser.add_argument(
        "--settings", type=_settings_arg, action="append", default=[], metavar="MODULE=FILE"
    )
    parser.add_argument(
        "--tools",
        type=_settings_arg,
        action="append",
        default=[],
        metavar="MODULE=FILE",
        help="a module's granted host tools (JSON object)",
    )
    parser.add_argument(
        "--limits",
        type=_settings_arg,
        action="append",
        default=[],
        metavar="MODULE=FILE",
        help="a module's owner's caps (JSON object)",
    )
    parser.add_argument(
        "--inherit-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of the agent's environment to every executable",
    )
    parser.add_argument(
        "--mem-budget-gb", type=amount_arg, help="host memory budget (default: none)"
    )
    parser.add_argument(
        "--min-free-gb",
        type=amount_arg,
        default=1.0,
        help="host memory (MemAvailable) kept free for everything else (default 1)",
    )
    parser.add_argument(
        "--psi-limit",
        type=amount_arg,
        default=10.0,
        help="memory pressure (PSI some avg10, percent) above which the host counts as "
        "short of memory (default 10)",
    )
    parser.add_argument(
        "--no-host-memory",
        action="store_true",
        help="judge memory by --mem-budget-gb alone, not by the host's real memory",
    )
    parser.add_argument("--live-attempts", type=Path, help="JSON list of live attempt ids")
    parser.add_argument("--reap-period-s", type=seconds_arg, default=60.0)
    parser.add_argument("--platform", help="override OARBANK_PLATFORM (default: detected)")
    parser.add_argument("--path", default=SAFE_PATH, help="PATH for the executables")
    add_site_arguments(parser)
    parser.add_argument("--log-level", default="INFO")
    return parser


def _config(args: argparse.Namespace, state_dir: Path) -> NodeAgentConfig:
    """The agent's configuration from the command line; bad settings raise ``ValueError``."""
    return NodeAgentConfig(
        bundles=args.bundle,
        node_id=args.node_id,
        data_root=args.data_root,
        state_dir=state_dir,
        settings={m: load_json_file(p, f"{m} settings") for m, p in args.settings},
        tools={m: load_json_file(p, f"{m} tools") for m, p in args.tools},
        limits={m: load_json_file(p, f"{m} limits") for m, p in args.limits},
        extra_env={n: os.environ[n] for n in args.inherit_env if n in os.environ},
        mem_budget_gb=args.mem_budget_gb,
        live_attempts=args.live_attempts,
        platform=args.platform,
        path=args.path,
        site=site_from_args(args),
        options=SupervisorOptions(reap_period_s=args.reap_period_s),
        host_memory=None
        if args.no_host_memory
        else HostLimits(min_free_gb=args.min_free_gb, psi_limit=args.psi_limit),
    )


_HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _handle_signals(loop: asyncio.AbstractEventLoop, agent: NodeAgent) -> asyncio.Event:
    """Install the agent's signal handlers; the event is set by the first SIGTERM/SIGINT.

    A second SIGTERM/SIGINT exits at once (the services are left for the next agent to
    adopt); SIGHUP asks for a doctor run each time.
    """
    stop, _seen = stop_on_signals(loop, "services are left for adoption")
    hup_tasks: set[asyncio.Task[Any]] = set()

    def on_hup() -> None:
        # An operator's request: never debounced (unlike the runs events cause).
        task = loop.create_task(agent.doctor("SIGHUP"))
        hup_tasks.add(task)
        task.add_done_callback(hup_tasks.discard)

    loop.add_signal_handler(signal.SIGHUP, on_hup)
    return stop


async def run(args: argparse.Namespace) -> int:
    state_dir = args.state_dir or args.data_root / ".state"
    socket_path = args.socket or state_dir / "agent.sock"
    try:
        control.check_socket_path(socket_path)
        agent = NodeAgent(_config(args, state_dir))
    except (ManifestError, ValueError) as exc:
        print(f"oarbank agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        agent.lock()
    except StateLocked as exc:
        print(f"oarbank agent: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    loop = asyncio.get_running_loop()
    stop = _handle_signals(loop, agent)
    server: asyncio.AbstractServer | None = None
    try:
        await agent.recover()
        if not stop.is_set():
            agent.start_loops()
            server = await control.serve(socket_path, lambda req: answer(agent, req))
            log.info(
                "serving %s on %s (node %s)",
                ", ".join(agent.managers),
                socket_path,
                args.node_id,
            )
            await stop.wait()
        if server is not None:
            server.close()
        clean = await agent.shutdown()
        return EXIT_OK if clean else EXIT_INCOMPLETE
    finally:
        for signum in _HANDLED_SIGNALS:
            loop.remove_signal_handler(signum)
        if server is not None:
            socket_path.unlink(missing_ok=True)
        agent.unlock()


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    setup_logging(str(args.log_level))
    return asyncio.run(run(args))
