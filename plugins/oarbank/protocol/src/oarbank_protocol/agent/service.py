"""``python -m oarbank_protocol.agent``: keep ONE service of a module bundle running, in the foreground.

This is the process srt launches for its ``oarbank`` kind. It adopts the service if it
already runs (the state file plus ``fingerprint.running``), otherwise starts it, keeps it
running ``always``-style (restarts with backoff, ``max_failures`` → exit 3), and on SIGTERM
or SIGINT, in every mode and at any point, stops it through the protocol (escalating to
``destroy --force`` when ``stop`` fails or lies), reaps its owned objects and checks with
``list_owned`` that they are gone. If the agent is SIGKILLed, the service keeps running and
the next agent adopts it instead of starting a second one. A second SIGTERM/SIGINT during
teardown exits at once (143/130) and leaves the service for the next agent to adopt.

Exit status: 0 clean stop (``--once``: ready); 1 teardown incomplete: a stop that failed or
claimed success while ``status`` still said running, owned objects left or still busy after
the stop, liveness unreadable (``--once``: not ready); 2 usage or bundle error; 3 the service
became unhealthy/failed; 4 another agent holds the state file; 5 the service does not run on
this platform (nothing was called); 128+N ``--once`` interrupted by signal N (the service
was stopped).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from oarbank_protocol.agent.process import STOP_SIGNALS, setup_logging, stop_on_signals
from oarbank_protocol.agent.site import add_site_arguments, site_from_args
from oarbank_protocol.errors import ManifestError, StateLocked
from oarbank_protocol.execution.bundle import Bundle, load_bundle
from oarbank_protocol.execution.environment import (
    SAFE_PATH,
    ExecContext,
    load_json_file,
    write_json_atomic,
)
from oarbank_protocol.lifecycle.events import ManagerEvent
from oarbank_protocol.lifecycle.manager import ModuleManager
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.lifecycle.reaper import Liveness, file_liveness, static_liveness
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.state_store import StateStore
from oarbank_protocol.lifecycle.states import ServiceState
from oarbank_protocol.lifecycle.supervisor import ServiceSupervisor
from oarbank_protocol.manifest import ModuleManifest, ServiceSpec
from oarbank_protocol.numbers import amount_arg, op_timeout_arg, seconds_arg
from oarbank_protocol.platforms import platform_matches

log = logging.getLogger("oarbank_protocol.agent")

#: How usage messages name the program; a host passes its own (srt's kind runs it as
#: ``python -m srt_oarbank.agent``).
PROG = "python -m oarbank_protocol.agent"

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_UNHEALTHY = 3
EXIT_LOCKED = 4
EXIT_UNSUPPORTED = 5


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
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
        "--inherit-env",
        action="append",
        default=[],
        metavar="NAME",
        help="pass this variable of the agent's environment on to the executables (srt passes "
        "its job cookie, so whatever a module starts is still found at job end)",
    )
    parser.add_argument(
        "--live-attempts",
        type=Path,
        help="JSON list of live attempt ids, for reaping; without it periodic reaping is "
        "skipped and teardown treats every attempt as gone",
    )
    parser.add_argument(
        "--teardown-all-gone",
        action="store_true",
        help="at teardown every attempt counts as gone, whatever --live-attempts says (the "
        "host ends the job the attempts belong to: srt's kind)",
    )
    parser.add_argument("--status-file", type=Path, help="write a JSON status here on changes")
    parser.add_argument("--mem-budget-gb", type=amount_arg, help="host memory budget for reserves")
    parser.add_argument("--reap-period-s", type=seconds_arg, default=60.0)
    parser.add_argument(
        "--once-timeout-s", type=seconds_arg, help="--once: give up after this long"
    )
    parser.add_argument(
        "--timeout", type=op_timeout_arg, action="append", default=[], metavar="OP=SECONDS"
    )
    parser.add_argument(
        "--keep-running-when-unhealthy",
        action="store_true",
        help="do not exit 3 when the service becomes unhealthy",
    )
    add_site_arguments(parser)
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


def _inherited_env(names: list[str]) -> dict[str, str]:
    return {name: os.environ[name] for name in names if name in os.environ}


async def run_agent(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    # First, so that a signal during loading or recovery is obeyed too (never lost).
    stop_requested, signals_seen = stop_on_signals(loop, "the service is left for adoption")
    try:
        return await _run(args, stop_requested, signals_seen)
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


def _load(args: argparse.Namespace) -> tuple[Bundle, ServiceSpec, ExecContext]:
    """The bundle, the service to keep running and its context; bad input raises."""
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
        extra_env=_inherited_env(args.inherit_env),
        site=site_from_args(args),
    )
    return bundle, spec, context


def _manager(
    args: argparse.Namespace,
    bundle: Bundle,
    spec: ServiceSpec,
    context: ExecContext,
    store: StateStore,
    liveness: Liveness | None,
    status: _StatusWriter,
) -> ModuleManager:
    """A manager of this one service; ``on_demand`` runs as ``always`` (srt wants it up)."""
    if spec.lifecycle == "on_demand":
        spec = spec.model_copy(update={"lifecycle": "always"})
    manifest = ModuleManifest(name=bundle.manifest.name, services=[spec], probes=[])
    return ModuleManager.for_bundle(
        bundle,
        context,
        manifest=manifest,
        timeouts=dict(args.timeout),
        store=store,
        liveness=liveness,
        resources=NodeResources(args.mem_budget_gb),
        options=SupervisorOptions(reap_period_s=args.reap_period_s),
        on_event=status,
    )


async def _run(args: argparse.Namespace, stop_requested: asyncio.Event, signals: list[int]) -> int:
    try:
        bundle, spec, context = _load(args)
    except (ManifestError, ValueError) as exc:
        print(f"oarbank agent: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not platform_matches(spec.platforms, context.platform):
        # Not a failure to retry: nothing of the module may run here (spec: "A service limited
        # by platforms runs only there"), so no op is called and the answer is immediate.
        print(
            f"oarbank agent: service {spec.name!r} of module {bundle.name!r} does not run on "
            f"platform {context.platform} (manifest platforms: {', '.join(spec.platforms)})",
            file=sys.stderr,
        )
        return EXIT_UNSUPPORTED
    store = StateStore(args.state.resolve())
    try:
        store.lock()
    except StateLocked as exc:
        print(f"oarbank agent: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    try:
        periodic: Liveness | None = (
            file_liveness(args.live_attempts) if args.live_attempts else None
        )
        status = _StatusWriter(args.status_file, bundle.name, args.node_id)
        manager = _manager(args, bundle, spec, context, store, periodic, status)
        supervisor = manager.services[spec.name]
        status.supervisor = supervisor
        teardown: Liveness = (
            static_liveness(()) if args.teardown_all_gone or periodic is None else periodic
        )
        return await _supervise(
            args, manager, supervisor, status, teardown, stop_requested, signals
        )
    finally:
        store.unlock()


async def _supervise(
    args: argparse.Namespace,
    manager: ModuleManager,
    supervisor: ServiceSupervisor,
    status: _StatusWriter,
    teardown: Liveness,
    stop_requested: asyncio.Event,
    signals: list[int],
) -> int:
    """Recover, run until stopped (or unhealthy, or ready with ``--once``), tear down."""
    await manager.recover()
    status.write()
    if stop_requested.is_set():
        log.info("stop requested while recovering: not starting %s", supervisor.name)
        clean = await _teardown(manager, supervisor, teardown)
        status.write()
        if args.once:
            return 128 + signals[0]
        return EXIT_OK if clean else EXIT_INCOMPLETE
    manager.start_loops()
    if args.once:
        return await _once(
            manager, supervisor, args.once_timeout_s, stop_requested, signals, teardown
        )
    unhealthy = await _until_stop_or_unhealthy(
        supervisor, stop_requested, watch_health=not args.keep_running_when_unhealthy
    )
    if unhealthy:
        log.error("%s is %s: %s", supervisor.name, supervisor.state, supervisor.reason)
    clean = await _teardown(manager, supervisor, teardown)
    status.write()
    if unhealthy:
        return EXIT_UNHEALTHY
    return EXIT_OK if clean else EXIT_INCOMPLETE


async def _until_stop_or_unhealthy(
    supervisor: ServiceSupervisor, stop_requested: asyncio.Event, *, watch_health: bool
) -> bool:
    """Wait for a stop request or (``watch_health``) the service's giving up; True for the
    latter."""
    waiters: set[asyncio.Future[bool]] = {asyncio.ensure_future(stop_requested.wait())}
    if watch_health:
        waiters.add(
            asyncio.ensure_future(
                supervisor.wait_state(ServiceState.UNHEALTHY, ServiceState.FAILED)
            )
        )
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
    return not stop_requested.is_set()


async def _teardown(
    manager: ModuleManager, supervisor: ServiceSupervisor, liveness: Liveness
) -> bool:
    """Stop through the protocol, reap, then check; True only when nothing is left.

    Exit 0 must mean "nothing of ours is left on this node": a stop that failed, a stop that
    claimed success while ``status`` still said running, objects the reaper could not
    destroy, objects still busy after the stop, or liveness we could not read all make the
    teardown incomplete, and each is logged with its reason.
    """
    await manager.shutdown(stop_services=True, reap=False)
    clean = True
    if supervisor.lifecycle != "manual" and supervisor.state not in (
        ServiceState.STOPPED,
        ServiceState.UNSUPPORTED,
    ):
        log.error("teardown: %s is %s: %s", supervisor.name, supervisor.state, supervisor.reason)
        clean = False
    stop = supervisor.last_stop
    if stop is not None and stop.claimed_but_running:
        log.error("teardown: %s: %s", supervisor.name, stop.reason)
        clean = False
    if supervisor.lifecycle == "manual" or not supervisor.supported:
        return clean
    report = await supervisor.clear_owned(liveness)
    if report.reap.destroyed:
        log.info("teardown: destroyed %s", ", ".join(report.reap.destroyed))
    if report.forced:
        log.error(
            "teardown: still busy after stop, destroyed with --force: %s", ", ".join(report.forced)
        )
    if report.failed:
        log.error("teardown: destroy --force failed: %s", report.failed)
    if report.leftovers:
        log.error("teardown: owned objects left on this node: %s", ", ".join(report.leftovers))
    if report.problem:
        log.error("teardown: %s", report.problem)
    supervisor.leftover_ids = sorted({*supervisor.leftover_ids, *report.leftovers})
    manager.persist()
    return clean and report.clean


async def _once(
    manager: ModuleManager,
    supervisor: ServiceSupervisor,
    timeout: float | None,
    stop_requested: asyncio.Event,
    signals: list[int],
    teardown: Liveness,
) -> int:
    wanted = (ServiceState.READY, ServiceState.UNHEALTHY, ServiceState.FAILED)
    reached = True
    if supervisor.lifecycle != "manual":
        waiter = asyncio.ensure_future(supervisor.wait_state(*wanted, timeout_s=timeout))
        stopper = asyncio.ensure_future(stop_requested.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if waiter.done():
            reached = waiter.result()
        else:
            waiter.cancel()
            reached = False
    interrupted = stop_requested.is_set()
    if interrupted:
        # SIGTERM means stop, in every mode: whatever this run started or adopted is
        # stopped through the protocol and reaped, not left half-started.
        await _teardown(manager, supervisor, teardown)
    else:
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
                "timed_out": not reached and not interrupted,
                "interrupted": interrupted,
            }
        )
    )
    if interrupted:
        return 128 + signals[0]
    return EXIT_OK if snap.state == ServiceState.READY else EXIT_INCOMPLETE


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(argv)
    setup_logging(str(args.log_level))
    return asyncio.run(run_agent(args))


if __name__ == "__main__":
    raise SystemExit(main())
