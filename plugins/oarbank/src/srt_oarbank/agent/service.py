"""``python -m srt_oarbank.agent``: keep ONE service of a module bundle running, in the foreground.

This is the process srt launches for its ``oarbank`` kind. It adopts the service if it
already runs (the state file plus ``fingerprint.running``), otherwise starts it, keeps it
running ``always``-style (restarts with backoff, ``max_failures`` → exit 3), and on SIGTERM
or SIGINT stops it through the protocol and reaps its owned objects. If the agent is
SIGKILLed, the service keeps running and the next agent adopts it instead of starting a
second one. A second SIGTERM/SIGINT during teardown exits at once (143/130) and leaves the
service for the next agent to adopt.

Exit status: 0 clean stop (``--once``: ready), 1 teardown incomplete (``--once``: not ready),
2 usage or bundle error, 3 the service became unhealthy/failed, 4 another agent holds the
state file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from srt_oarbank.execution.bundle import load_bundle
from srt_oarbank.execution.environment import SAFE_PATH, load_json_file, write_json_atomic
from srt_oarbank.lifecycle.events import ManagerEvent
from srt_oarbank.lifecycle.manager import ModuleManager
from srt_oarbank.lifecycle.reaper import Liveness, file_liveness, static_liveness
from srt_oarbank.lifecycle.resources import NodeResources
from srt_oarbank.lifecycle.state_store import StateStore
from srt_oarbank.lifecycle.supervisor import ServiceState, ServiceSupervisor, SupervisorOptions
from srt_oarbank.protocol.errors import ManifestError, StateLocked
from srt_oarbank.protocol.manifest import OPS, ModuleManifest

log = logging.getLogger("srt_oarbank.agent")

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_UNHEALTHY = 3
EXIT_LOCKED = 4


def _timeout_arg(value: str) -> tuple[str, float]:
    op, sep, seconds = value.partition("=")
    if not sep or op not in OPS:
        raise argparse.ArgumentTypeError(f"expected OP=SECONDS with OP one of {', '.join(OPS)}")
    try:
        number = float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {seconds!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError("timeouts must be > 0")
    return op, number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m srt_oarbank.agent",
        description="Run one service of an oarbank module bundle under the lifecycle manager.",
    )
    parser.add_argument("--bundle", type=Path, required=True, help="bundle directory")
    parser.add_argument("--service", required=True, help="service name in the manifest")
    parser.add_argument("--node-id", required=True, help="this node's id (OARBANK_NODE_ID)")
    parser.add_argument("--data", type=Path, required=True, help="module data directory")
    parser.add_argument("--state", type=Path, required=True, help="state file (adoption)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--serve", action="store_true", help="run until SIGTERM (default)")
    mode.add_argument(
        "--once", action="store_true", help="adopt or start, wait for ready, exit (keep it up)"
    )
    parser.add_argument("--settings", type=Path, help="module settings (JSON object)")
    parser.add_argument("--tools", type=Path, help="granted host tools (JSON object)")
    parser.add_argument("--limits", type=Path, help="owner's caps (JSON object)")
    parser.add_argument("--platform", help="override OARBANK_PLATFORM (default: detected)")
    parser.add_argument("--path", default=SAFE_PATH, help="PATH for the executables")
    parser.add_argument(
        "--live-attempts",
        type=Path,
        help="JSON list of live attempt ids, for reaping; without it periodic reaping is "
        "skipped and teardown treats every attempt as gone",
    )
    parser.add_argument("--status-file", type=Path, help="write a JSON status here on changes")
    parser.add_argument("--mem-budget-gb", type=float, help="host memory budget for reserves")
    parser.add_argument("--reap-period-s", type=float, default=60.0)
    parser.add_argument("--once-timeout-s", type=float, help="--once: give up after this long")
    parser.add_argument(
        "--timeout", type=_timeout_arg, action="append", default=[], metavar="OP=SECONDS"
    )
    parser.add_argument(
        "--keep-running-when-unhealthy",
        action="store_true",
        help="do not exit 3 when the service becomes unhealthy",
    )
    parser.add_argument("--log-level", default="INFO")
    return parser


class _StatusWriter:
    """Mirrors the service's state into a JSON file that srt (or a human) can read."""

    def __init__(self, path: Path | None, module: str, node_id: str) -> None:
        self.path = path
        self.module = module
        self.node_id = node_id
        self.supervisor: ServiceSupervisor | None = None

    def document(self) -> dict[str, Any]:
        assert self.supervisor is not None
        snap = self.supervisor.snapshot()
        return {
            "module": self.module,
            "service": snap.name,
            "node_id": self.node_id,
            "state": snap.state,
            "reason": snap.reason,
            "ready": snap.state == ServiceState.READY,
            "available": snap.available,
            "restart_count": snap.restart_count,
            "start_attempts": snap.start_attempts,
            "pid": snap.pid,
            "adopted": snap.adopted,
            "leftover_ids": list(snap.leftover_ids),
            "agent_pid": os.getpid(),
            "updated": time.time(),
        }

    def __call__(self, event: ManagerEvent) -> None:
        self.write()

    def write(self) -> None:
        if self.path is None or self.supervisor is None:
            return
        try:
            write_json_atomic(self.path, self.document(), mode=0o644)
        except OSError as exc:
            log.warning("cannot write status file %s: %s", self.path, exc)


async def run_agent(args: argparse.Namespace) -> int:
    try:
        bundle = load_bundle(args.bundle)
        spec = bundle.manifest.service(args.service)
        settings = load_json_file(args.settings, "settings") if args.settings else {}
        tools = load_json_file(args.tools, "tools") if args.tools else {}
        limits = load_json_file(args.limits, "limits") if args.limits else {}
        context = bundle.context(
            node_id=args.node_id,
            data_dir=args.data.resolve(),
            settings=settings,
            tools=tools,
            limits=limits,
            platform=args.platform,
            path=args.path,
        )
    except (ManifestError, ValueError) as exc:
        print(f"oarbank agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if spec.lifecycle == "on_demand":
        spec = spec.model_copy(update={"lifecycle": "always"})
    manifest = ModuleManifest(name=bundle.manifest.name, services=[spec], probes=[])
    store = StateStore(args.state.resolve())
    try:
        store.lock()
    except StateLocked as exc:
        print(f"oarbank agent: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    periodic: Liveness | None = file_liveness(args.live_attempts) if args.live_attempts else None
    teardown: Liveness = periodic or static_liveness(())
    status = _StatusWriter(args.status_file, bundle.name, args.node_id)
    manager = ModuleManager.for_bundle(
        bundle,
        context,
        manifest=manifest,
        timeouts=dict(args.timeout),
        store=store,
        liveness=periodic,
        resources=NodeResources(args.mem_budget_gb),
        options=SupervisorOptions(reap_period_s=args.reap_period_s),
        on_event=status,
    )
    supervisor = manager.services[spec.name]
    status.supervisor = supervisor
    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()
    signals_seen: list[int] = []

    def on_signal(signum: int) -> None:
        signals_seen.append(signum)
        if len(signals_seen) == 1:
            log.info("received %s: stopping %s", signal.Signals(signum).name, spec.name)
            stop_requested.set()
        else:
            log.warning("second signal: exiting now; the service is left for adoption")
            os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        await manager.start()
        status.write()
        if args.once:
            return await _once(manager, supervisor, args.once_timeout_s)
        stop_wait = asyncio.ensure_future(stop_requested.wait())
        bad_wait = asyncio.ensure_future(
            supervisor.wait_state(ServiceState.UNHEALTHY, ServiceState.FAILED)
        )
        waiters = {stop_wait} if args.keep_running_when_unhealthy else {stop_wait, bad_wait}
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        stop_wait.cancel()
        bad_wait.cancel()
        unhealthy = not stop_requested.is_set()
        if unhealthy:
            log.error("%s is %s: %s", spec.name, supervisor.state, supervisor.reason)
        reports = await manager.shutdown(stop_services=True, reap=True, reap_liveness=teardown)
        status.write()
        for report in reports.values():
            if report.failed or report.skipped:
                log.warning(
                    "teardown reaping: destroyed %d, failed %s, skipped: %s",
                    len(report.destroyed),
                    report.failed,
                    report.skipped,
                )
        if unhealthy:
            return EXIT_UNHEALTHY
        clean = supervisor.state in (ServiceState.STOPPED, ServiceState.UNSUPPORTED) or (
            spec.lifecycle == "manual"
        )
        return EXIT_OK if clean else EXIT_INCOMPLETE
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        store.unlock()


async def _once(
    manager: ModuleManager, supervisor: ServiceSupervisor, timeout: float | None
) -> int:
    wanted = (ServiceState.READY, ServiceState.UNHEALTHY, ServiceState.FAILED)
    if supervisor.lifecycle == "manual":
        reached = True
    else:
        reached = await supervisor.wait_state(*wanted, timeout_s=timeout)
    await manager.shutdown(stop_services=False, reap=False)
    snap = supervisor.snapshot()
    print(
        json.dumps(
            {
                "service": snap.name,
                "state": snap.state,
                "reason": snap.reason,
                "ready": snap.state == ServiceState.READY,
                "restart_count": snap.restart_count,
                "pid": snap.pid,
                "adopted": snap.adopted,
                "timed_out": not reached,
            }
        )
    )
    return EXIT_OK if snap.state == ServiceState.READY else EXIT_INCOMPLETE


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(run_agent(args))


if __name__ == "__main__":
    raise SystemExit(main())
