"""``srt oarbank agent``: run bundles of modules on this node, and admit work against them.

Where the one-service agent (``python -m oarbank_protocol.agent``, the ``oarbank`` kind's process)
keeps a single service up for srt, this is the agent the protocol describes for a node: one
:class:`~oarbank_protocol.lifecycle.manager.ModuleManager` per bundle, all on one host-memory
budget, with their lifecycles as the manifests say (``always`` services kept running,
``on_demand`` ones started by the first admission that needs them and stopped after
``idle_timeout_s``, ``manual`` ones only fingerprinted, idle ``yieldable`` ones stopped
under memory pressure), probes on their periods, reaping, and the control socket
(:mod:`oarbank_protocol.agent.control`) through which a job stage is admitted and released.

Capabilities and pools are named ``module/name`` (``colima/vm``, ``colima/containers``); a
bare name is accepted when exactly one module has it. An admission is checked in full
(capabilities, pool tokens, host memory with the reservations of the services it would
start) before anything starts, then waits until those services are ready; one that touches
several modules is all or nothing.

Doctor runs (every probe and every service fingerprint, now) happen on request (``srt
oarbank doctor``, SIGHUP), after an admission was refused for an unavailable capability (the
host may have been fixed since the last period), and when a service becomes unhealthy or
failed.

SIGTERM/SIGINT: every started service is stopped through the protocol (with the P11
escalation), owned objects of attempts that are not live are reaped and checked gone; exit
0 when nothing is left, 1 otherwise. A second signal exits at once (services are adopted
by the next agent). Exit 2: usage or bundle error; 4: another agent holds a state file.

Not run by this agent (see docs/protocol-adapter.md): the sandbox and its container broker
(executables run as the agent's user, unconfined), and freezing (``freeze_ok`` is read and
reported, never acted on).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from oarbank_protocol.agent import control
from oarbank_protocol.agent.process import setup_logging, stop_on_signals
from oarbank_protocol.errors import (
    AdmissionRefused,
    CapabilityUnavailable,
    ManifestError,
    MemoryExhausted,
    OarbankError,
    StateLocked,
    UnknownCapability,
)
from oarbank_protocol.execution.bundle import Bundle, load_bundle
from oarbank_protocol.execution.environment import SAFE_PATH, load_json_file
from oarbank_protocol.lifecycle.events import ManagerEvent
from oarbank_protocol.lifecycle.manager import AdmissionRequest, ModuleManager
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.lifecycle.reaper import Liveness, file_liveness, static_liveness
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.state_store import StateStore
from oarbank_protocol.lifecycle.states import ServiceState
from oarbank_protocol.names import check_name
from oarbank_protocol.numbers import amount_arg, is_finite_number, seconds_arg

log = logging.getLogger("oarbank_protocol.agent.node")

#: How usage messages name the program; a host passes its own (``srt oarbank agent``).
PROG = "python -m oarbank_protocol.agent.node"

EXIT_OK = 0
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_LOCKED = 4
#: Doctor runs caused by events (not by an operator) are at most this frequent per module.
DOCTOR_DEBOUNCE_S = 2.0
DOCTOR_EVENTS = frozenset({"unhealthy", "failed"})


@dataclass
class NodeAgentConfig:
    bundles: list[Path]
    node_id: str
    data_root: Path
    state_dir: Path
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    mem_budget_gb: float | None = None
    live_attempts: Path | None = None
    platform: str | None = None
    path: str = SAFE_PATH
    options: SupervisorOptions = field(default_factory=SupervisorOptions)


class NodeAgent:
    def __init__(self, config: NodeAgentConfig) -> None:
        check_name(config.node_id, "node id")
        self.config = config
        self.resources = NodeResources(config.mem_budget_gb)
        self.liveness: Liveness | None = (
            file_liveness(config.live_attempts) if config.live_attempts else None
        )
        self.bundles: dict[str, Bundle] = {}
        for root in config.bundles:
            bundle = load_bundle(root)
            if bundle.name in self.bundles:
                raise ManifestError(
                    f"two bundles are module {bundle.name!r}: {self.bundles[bundle.name].root} "
                    f"and {bundle.root}"
                )
            self.bundles[bundle.name] = bundle
        unknown = sorted(set(config.settings) - set(self.bundles))
        if unknown:
            raise ManifestError(f"settings for modules that are not loaded: {unknown}")
        self.stores: dict[str, StateStore] = {}
        self.managers: dict[str, ModuleManager] = {}
        for name, bundle in self.bundles.items():
            context = bundle.context(
                node_id=config.node_id,
                data_dir=(config.data_root / name).resolve(),
                settings=config.settings.get(name, {}),
                platform=config.platform,
                path=config.path,
            )
            store = StateStore((config.state_dir / f"{name}.state.json").resolve())
            self.stores[name] = store
            self.managers[name] = ModuleManager.for_bundle(
                bundle,
                context,
                store=store,
                liveness=self.liveness,
                resources=self.resources.scoped(name),
                options=config.options,
                on_event=lambda event, module=name: self._on_event(module, event),
            )
        self._node_charges: set[str] = set()
        self._doctor_tasks: dict[str, asyncio.Task[None]] = {}
        self._last_doctor: dict[str, float] = {}

    # ------------------------------------------------------------------ lifecycle

    def lock(self) -> None:
        """Take every state file's lock, or none (StateLocked)."""
        taken: list[StateStore] = []
        try:
            for store in self.stores.values():
                store.lock()
                taken.append(store)
        except StateLocked:
            for store in taken:
                store.unlock()
            raise

    def unlock(self) -> None:
        for store in self.stores.values():
            store.unlock()

    async def recover(self) -> None:
        await asyncio.gather(*(m.recover() for m in self.managers.values()))

    def start_loops(self) -> None:
        for manager in self.managers.values():
            manager.start_loops()

    async def shutdown(self) -> bool:
        """Stop through the protocol, reap, check; True when nothing of ours is left."""
        for task in self._doctor_tasks.values():
            task.cancel()
        await asyncio.gather(*self._doctor_tasks.values(), return_exceptions=True)
        for attempt in list(self._node_charges):
            self.release(attempt)
        teardown = self.liveness or static_liveness(())
        await asyncio.gather(
            *(m.shutdown(stop_services=True, reap=False) for m in self.managers.values())
        )
        clean = True
        for module, manager in self.managers.items():
            for sup in manager.services.values():
                if not sup.supported or sup.lifecycle == "manual":
                    continue
                if sup.state != ServiceState.STOPPED:
                    log.error("%s/%s is %s: %s", module, sup.name, sup.state, sup.reason)
                    clean = False
                if sup.last_stop is not None and sup.last_stop.claimed_but_running:
                    log.error("%s/%s: %s", module, sup.name, sup.last_stop.reason)
                    clean = False
                report = await sup.clear_owned(teardown)
                if not report.clean:
                    log.error(
                        "%s/%s: teardown left %s (forced %s, failed %s) %s",
                        module,
                        sup.name,
                        report.leftovers,
                        report.forced,
                        report.failed,
                        report.problem,
                    )
                    clean = False
            manager.persist()
        return clean

    # ------------------------------------------------------------------ doctor

    def _on_event(self, module: str, event: ManagerEvent) -> None:
        if event.kind in DOCTOR_EVENTS and event.subject in self.managers[module].services:
            self.schedule_doctor(module, f"{event.subject} became {event.kind}")

    def schedule_doctor(self, module: str, reason: str) -> None:
        """Run a doctor of ``module`` soon, unless one ran or is running within the debounce."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        running = self._doctor_tasks.get(module)
        if running is not None and not running.done():
            return
        if now - self._last_doctor.get(module, -1e9) < DOCTOR_DEBOUNCE_S:
            return
        self._last_doctor[module] = now

        async def run() -> None:
            await self.managers[module].doctor(reason)

        self._doctor_tasks[module] = loop.create_task(run(), name=f"oarbank:doctor:{module}")

    async def doctor(self, reason: str = "requested") -> dict[str, Any]:
        reports = await asyncio.gather(
            *(m.doctor(reason) for m in self.managers.values()), return_exceptions=False
        )
        out: dict[str, Any] = {}
        for module, report in zip(self.managers, reports, strict=True):
            for name, cap in report.items():
                out[f"{module}/{name}"] = asdict(cap)
        return out

    # ------------------------------------------------------------------ admission

    def _module_of(self, name: str, *, pool: bool) -> tuple[str, str]:
        if "/" in name:
            module, local = name.split("/", 1)
            if module not in self.managers:
                raise UnknownCapability(
                    f"no module {module!r} on node {self.config.node_id!r} "
                    f"(modules: {', '.join(sorted(self.managers)) or 'none'})"
                )
            return module, local
        owners = []
        for module, manager in self.managers.items():
            if pool:
                names = {p for s in manager.services.values() for p in s.spec.pools}
            else:
                names = set(manager.services) | set(manager.probes)
            if name in names:
                owners.append(module)
        if len(owners) > 1:
            raise UnknownCapability(
                f"{name!r} is ambiguous: modules {', '.join(owners)} all have it; write "
                f"module/{name}"
            )
        if not owners:
            what = "pool" if pool else "capability"
            raise UnknownCapability(
                f"no module on node {self.config.node_id!r} has {what} {name!r}"
            )
        return owners[0], name

    def _split(self, request: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
        parts: dict[str, dict[str, Any]] = {}

        def part(module: str) -> dict[str, Any]:
            return parts.setdefault(module, {"needs": set(), "pools": {}, "needs_pools": set()})

        for name in _strings(request.get("needs", []), "needs"):
            module, local = self._module_of(name, pool=False)
            part(module)["needs"].add(local)
        pools = request.get("pools", {})
        if not isinstance(pools, dict):
            raise AdmissionRefused("pools must be an object {pool: tokens}")
        for name, count in pools.items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise AdmissionRefused(f"pools.{name} must be a whole number >= 0")
            module, local = self._module_of(name, pool=True)
            part(module)["pools"][local] = count
        for name in _strings(request.get("needs_pools", []), "needs_pools"):
            module, local = self._module_of(name, pool=True)
            part(module)["needs_pools"].add(local)
        return parts

    async def admit(self, request: Mapping[str, Any]) -> dict[str, Any]:
        attempt = request.get("attempt_id")
        if not isinstance(attempt, str):
            raise AdmissionRefused("attempt_id (a string) is required")
        check_name(attempt, "attempt id")
        mem_gb = request.get("mem_gb", 0.0)
        if not is_finite_number(mem_gb) or mem_gb < 0:
            raise AdmissionRefused("mem_gb must be a finite number >= 0")
        timeout = request.get("timeout_s")
        if timeout is not None and (not is_finite_number(timeout) or timeout <= 0):
            raise AdmissionRefused("timeout_s must be a finite number > 0")
        parts = self._split(request)
        if any(attempt in m.snapshot().admissions for m in self.managers.values()) or (
            attempt in self._node_charges
        ):
            raise AdmissionRefused(f"attempt {attempt!r} is already admitted")
        wait = float(timeout) if timeout is not None else None
        try:
            return await self._admit_once(attempt, parts, float(mem_gb), wait)
        except MemoryExhausted as exc:
            # A module yields its own idle services for its admissions; the node's budget is
            # shared, so idle yieldable services of the *other* modules may make room too.
            shortfall = exc.needed_gb - exc.free_gb
            keep = {
                module: manager.needed_services(self._request(attempt, parts.get(module)))
                for module, manager in self.managers.items()
            }
            available = sum(m.yieldable_gb(exclude=keep[n]) for n, m in self.managers.items())
            if shortfall <= 0 or available + 1e-9 < shortfall:
                raise
            freed = 0.0
            for module, manager in self.managers.items():
                if freed >= shortfall:
                    break
                freed += await manager.relieve_memory_pressure(
                    shortfall - freed, exclude=keep[module]
                )
            await asyncio.gather(*(m.wait_yields() for m in self.managers.values()))
            return await self._admit_once(attempt, parts, float(mem_gb), wait)

    @staticmethod
    def _request(
        attempt: str, want: dict[str, Any] | None, mem_gb: float = 0.0
    ) -> AdmissionRequest:
        want = want or {"needs": set(), "pools": {}, "needs_pools": set()}
        return AdmissionRequest(
            attempt,
            needs=frozenset(want["needs"]),
            pools=dict(want["pools"]),
            needs_pools=frozenset(want["needs_pools"]),
            mem_gb=mem_gb,
        )

    async def _admit_once(
        self,
        attempt: str,
        parts: dict[str, dict[str, Any]],
        mem_gb: float,
        timeout: float | None,
    ) -> dict[str, Any]:
        if not parts and mem_gb:
            # Memory only: the node's budget, charged to the attempt itself.
            self.resources.check_memory({f"attempt:{attempt}": float(mem_gb)})
            self.resources.charge(f"attempt:{attempt}", float(mem_gb))
            self._node_charges.add(attempt)
        admitted: list[str] = []
        granted: dict[str, Any] = {}
        try:
            for index, module in enumerate(sorted(parts)):
                want = parts[module]
                admission = await self.managers[module].admit(
                    self._request(attempt, want, mem_gb if index == 0 else 0.0),
                    timeout_s=timeout,
                )
                admitted.append(module)
                granted[module] = {
                    "services": list(admission.services),
                    "probes": list(admission.probes),
                    "pools": dict(admission.pools),
                }
        except CapabilityUnavailable as exc:
            for module in admitted:
                self.managers[module].release(attempt)
            if attempt in self._node_charges:
                self._node_charges.discard(attempt)
                self.resources.release(f"attempt:{attempt}")
            owner = next(
                (m for m in parts if exc.capability in self.managers[m].capabilities()), None
            )
            for module in [owner] if owner else list(parts):
                self.schedule_doctor(module, f"admission of {attempt} refused: {exc.reason}")
            raise
        except BaseException:
            for module in admitted:
                self.managers[module].release(attempt)
            if attempt in self._node_charges:
                self._node_charges.discard(attempt)
                self.resources.release(f"attempt:{attempt}")
            raise
        return {"attempt_id": attempt, "modules": granted}

    def release(self, attempt: str) -> bool:
        released = False
        for manager in self.managers.values():
            released = manager.release(attempt) or released
        if attempt in self._node_charges:
            self._node_charges.discard(attempt)
            self.resources.release(f"attempt:{attempt}")
            released = True
        if released:
            self._end_pressure_if_room()
        return released

    def _end_pressure_if_room(self) -> None:
        """Let yielded services run again, as many as the freed memory holds."""
        free = self.resources.mem_free_gb()
        for manager in self.managers.values():
            for sup in manager.services.values():
                if not sup.yield_requested:
                    continue
                need = sup.reserve_needed_gb()
                if free is None or need <= free + 1e-9:
                    sup.end_yield()
                    if free is not None:
                        free -= need

    def reset(self, capability: str) -> bool:
        module, local = self._module_of(capability, pool=False)
        return self.managers[module].reset(local)

    def status(self) -> dict[str, Any]:
        modules: dict[str, Any] = {}
        for name, manager in self.managers.items():
            snap = manager.snapshot()
            modules[name] = {
                "services": {
                    s: {
                        "lifecycle": v.lifecycle,
                        "state": v.state,
                        "reason": v.reason,
                        "available": v.available,
                        "health": v.health,
                        "users": list(v.users),
                        "restart_count": v.restart_count,
                        "pid": v.pid,
                        "leftover_ids": list(v.leftover_ids),
                        "freeze_ok": manager.services[s].spec.freeze_ok,
                    }
                    for s, v in snap.services.items()
                },
                "probes": {
                    p: {
                        "available": ok,
                        "detail": manager.capability_report()[p].detail,
                    }
                    for p, ok in snap.probes.items()
                },
                "pools": {
                    "capacity": snap.resources.capacity,
                    "reserved": snap.resources.reserved,
                },
                "admissions": list(snap.admissions),
            }
        return {
            "node_id": self.config.node_id,
            "modules": modules,
            "memory": {
                "budget_gb": self.resources.mem_budget_gb,
                "charged_gb": self.resources.mem_charged_gb,
                "charges": self.resources.snapshot().charges,
            },
        }

    # ------------------------------------------------------------------ control

    async def handle(self, req: dict[str, Any]) -> dict[str, Any]:
        op = req.get("op")
        try:
            if op == "admit":
                return {"ok": True, **(await self.admit(req))}
            if op == "release":
                attempt = req.get("attempt_id")
                if not isinstance(attempt, str):
                    raise AdmissionRefused("attempt_id (a string) is required")
                return {"ok": True, "released": self.release(attempt)}
            if op == "status":
                return {"ok": True, **self.status()}
            if op == "doctor":
                return {"ok": True, "capabilities": await self.doctor("requested")}
            if op == "reset":
                capability = req.get("capability")
                if not isinstance(capability, str):
                    raise AdmissionRefused("capability (module/service) is required")
                return {"ok": True, "reset": self.reset(capability)}
            return {"ok": False, "error": f"unknown op {op!r}", "kind": "UsageError"}
        except (OarbankError, ValueError) as exc:
            return {
                "ok": False,
                "error": str(exc),
                "kind": type(exc).__name__,
                "retryable": bool(getattr(exc, "retryable", False)),
            }


def _strings(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AdmissionRefused(f"{what} must be a list of names")
    return list(value)


# --------------------------------------------------------------------------- CLI


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
        "--mem-budget-gb", type=amount_arg, help="host memory budget (default: none)"
    )
    parser.add_argument("--live-attempts", type=Path, help="JSON list of live attempt ids")
    parser.add_argument("--reap-period-s", type=seconds_arg, default=60.0)
    parser.add_argument("--platform", help="override OARBANK_PLATFORM (default: detected)")
    parser.add_argument("--path", default=SAFE_PATH, help="PATH for the executables")
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
        mem_budget_gb=args.mem_budget_gb,
        live_attempts=args.live_attempts,
        platform=args.platform,
        path=args.path,
        options=SupervisorOptions(reap_period_s=args.reap_period_s),
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
            server = await control.serve(socket_path, agent.handle)
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


if __name__ == "__main__":
    raise SystemExit(main())
