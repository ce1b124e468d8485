"""The lifecycle manager: one module's services and probes on one node.

:class:`ModuleManager` is what an agent (or srt's ``oarbank`` kind) drives:

* :meth:`ModuleManager.start` loads the persisted state, fingerprints every service, adopts
  the ones that already run, and starts the per-service loops and probe monitors;
* :meth:`ModuleManager.admit` checks capabilities, pool tokens and host memory *before*
  anything is launched, then reference-counts the attempt on each service it needs (starting
  on_demand services and waiting for ``ready``); :meth:`ModuleManager.release` undoes it and
  is idempotent;
* :meth:`ModuleManager.shutdown` stops services through the protocol and reaps.

Threading model: asyncio only. Create, start, use and shut down the manager on one event
loop; it is not thread-safe (call into it from other threads with
``asyncio.run_coroutine_threadsafe``). Per-service work runs in tasks owned by
:class:`~oarbank_protocol.lifecycle.supervisor.ServiceSupervisor`; protocol calls never block the loop
(:mod:`oarbank_protocol.execution.executor` uses no threads), so one hanging executable delays nobody else.
"""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oarbank_protocol.errors import (
    AdmissionRefused,
    CapabilityUnavailable,
    MemoryExhausted,
    UnknownCapability,
)
from oarbank_protocol.execution.broker import (
    BrokeredOps,
    ContainerBroker,
    serve_broker,
    with_broker_socket,
)
from oarbank_protocol.execution.bundle import Bundle
from oarbank_protocol.execution.client import FingerprintSource, ProtocolClient, ServiceOps
from oarbank_protocol.execution.environment import ExecContext
from oarbank_protocol.execution.executor import ExecLimits
from oarbank_protocol.lifecycle.clock import Clock, SystemClock
from oarbank_protocol.lifecycle.events import EventLog, EventSink, ManagerEvent
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.lifecycle.probes import ProbeMonitor
from oarbank_protocol.lifecycle.reaper import Liveness, ReapReport
from oarbank_protocol.lifecycle.resources import NodeResources, ResourceSnapshot
from oarbank_protocol.lifecycle.state_store import LoadedState, StateStore
from oarbank_protocol.lifecycle.states import ServiceSnapshot, ServiceState
from oarbank_protocol.lifecycle.supervisor import ServiceSupervisor
from oarbank_protocol.manifest import ModuleManifest, ProbeSpec, ServiceSpec
from oarbank_protocol.names import check_name
from oarbank_protocol.platforms import current_platform, platform_matches

log = logging.getLogger(__name__)

ManagerOptions = SupervisorOptions
"""Alias: the manager's knobs are the per-service supervisor options."""


@dataclass(frozen=True)
class AdmissionRequest:
    """What one attempt (a job stage) needs from this module on this node.

    ``needs`` names capabilities: service names or probe names. ``pools`` reserves tokens
    (``requires.pools``); ``needs_pools`` only requires the pool to exist
    (``requires.needs_pools``). A service is needed when named in ``needs`` or when it
    provides any requested pool. ``mem_gb`` is the job's own host memory, charged with the
    reservations of the services it makes start.
    """

    attempt_id: str
    needs: frozenset[str] = frozenset()
    pools: Mapping[str, int] = field(default_factory=dict)
    needs_pools: frozenset[str] = frozenset()
    mem_gb: float = 0.0


@dataclass(frozen=True)
class Admission:
    attempt_id: str
    services: tuple[str, ...]
    probes: tuple[str, ...]
    pools: Mapping[str, int]


@dataclass(frozen=True)
class ManagerSnapshot:
    module: str
    node_id: str
    services: dict[str, ServiceSnapshot]
    probes: dict[str, bool]
    resources: ResourceSnapshot
    admissions: tuple[str, ...]


@dataclass(frozen=True)
class Capability:
    """One capability as a doctor run sees it."""

    kind: str
    available: bool
    detail: str
    health: str


OpsFactory = Callable[[ServiceSpec], ServiceOps]
ProbeFactory = Callable[[ProbeSpec], FingerprintSource]


def _check_available(services: list[ServiceSupervisor], probes: list[ProbeMonitor]) -> None:
    """Refuse an admission that needs a capability that is not available now."""
    for probe in probes:
        if not probe.available:
            raise CapabilityUnavailable(probe.name, probe.unavailable_reason())
    for sup in services:
        ok, why = sup.availability()
        if not ok:
            raise CapabilityUnavailable(sup.name, why)


class ModuleManager:
    def __init__(
        self,
        manifest: ModuleManifest,
        *,
        node_id: str,
        ops_factory: OpsFactory,
        probe_factory: ProbeFactory | None = None,
        clock: Clock | None = None,
        resources: NodeResources | None = None,
        store: StateStore | None = None,
        liveness: Liveness | None = None,
        options: SupervisorOptions | None = None,
        rng: random.Random | None = None,
        platform: str | None = None,
        on_event: EventSink | None = None,
        reaper: bool = True,
    ) -> None:
        check_name(node_id, "node id")
        self.manifest = manifest
        self.node_id = node_id
        self.clock = clock or SystemClock()
        self.resources = resources or NodeResources()
        self.store = store
        self.events = EventLog(on_event)
        self.options = options or SupervisorOptions()
        self.platform = platform or current_platform()
        self._reaper = reaper
        self._started = False
        self._admissions: dict[str, Admission] = {}
        self.loaded: LoadedState | None = None
        rng = rng or random.Random()
        self.services: dict[str, ServiceSupervisor] = {}
        for spec in manifest.services:
            self.services[spec.name] = ServiceSupervisor(
                spec,
                ops_factory(spec),
                node_id=node_id,
                clock=self.clock,
                resources=self.resources,
                events=self.events,
                options=self.options,
                rng=random.Random(rng.random()),
                liveness=liveness,
                persist=self._persist,
                supported=platform_matches(spec.platforms, self.platform),
            )
        self.probes: dict[str, ProbeMonitor] = {}
        for probe in manifest.probes:
            if probe_factory is None:
                raise ValueError("manifest declares probes but no probe_factory was given")
            self.probes[probe.name] = ProbeMonitor(
                probe,
                probe_factory(probe),
                clock=self.clock,
                events=self.events,
                supported=platform_matches(probe.platforms, self.platform),
            )
        self._probe_tasks: list[asyncio.Task[None]] = []
        #: the container broker of a module whose manifest declares containers (set by
        #: :meth:`for_bundle`), served on ``broker_socket`` from recovery to shutdown
        self.broker: ContainerBroker | None = None
        self.broker_socket: Path | None = None
        self._broker_server: asyncio.AbstractServer | None = None

    # ------------------------------------------------------------------ construction helpers

    @classmethod
    def for_bundle(
        cls,
        bundle: Bundle,
        context: ExecContext,
        *,
        limits: ExecLimits | None = None,
        timeouts: Mapping[str, float] | None = None,
        manifest: ModuleManifest | None = None,
        **kwargs: Any,
    ) -> ModuleManager:
        """A manager whose services and probes run the bundle's real executables.

        ``manifest`` lets a caller narrow or adjust the bundle's manifest (the agent keeps
        one service and forces it ``always``); keyword arguments go to the constructor.
        """

        sandbox = (manifest or bundle.manifest).sandbox
        broker: ContainerBroker | None = None
        if sandbox is not None and sandbox.containers:
            broker = ContainerBroker.for_specs(bundle.name, context.node_id, sandbox.containers)
            context, _ = with_broker_socket(context)

        def ops(spec: ServiceSpec) -> ServiceOps:
            client = ProtocolClient(
                bundle.executor(spec, context, limits=limits, timeouts=timeouts)
            )
            return BrokeredOps(client, broker, spec.name) if broker is not None else client

        def probe(spec: ProbeSpec) -> FingerprintSource:
            return ProtocolClient(bundle.executor(spec, context, limits=limits, timeouts=timeouts))

        manager = cls(
            manifest or bundle.manifest,
            node_id=context.node_id,
            ops_factory=ops,
            probe_factory=probe,
            platform=context.platform,
            **kwargs,
        )
        if broker is not None and context.broker_socket is not None:
            manager.broker = broker
            manager.broker_socket = context.broker_socket
        return manager

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Recover (adopt or not) every service, then start the loops; idempotent."""
        await self.recover()
        self.start_loops()

    async def recover(self) -> None:
        """Load the state, fingerprint every service and adopt what runs; start nothing.

        Split from :meth:`start_loops` so an agent told to stop while it was recovering
        can shut down without a first ``start`` slipping in between.
        """
        if self._started:
            return
        self._started = True
        if self.broker is not None and self.broker_socket is not None and not self._broker_server:
            self._broker_server = await serve_broker(self.broker, self.broker_socket)
        self.loaded = self.store.load() if self.store is not None else LoadedState("missing")
        if self.loaded.status in ("corrupt", "other_boot"):
            self.events.emit(
                ManagerEvent(
                    "state_discarded",
                    self.manifest.name,
                    self.loaded.message,
                    self.clock.monotonic(),
                )
            )
        records = self.loaded.services
        await asyncio.gather(
            *(
                sup.recover(records.get(name), trusted=self.loaded.trusted)
                for name, sup in self.services.items()
            )
        )
        await asyncio.gather(*(p.check_once() for p in self.probes.values() if p.supported))
        self._persist()
        if self.loaded.needs_rediscovery and self._reaper:
            # Lost track of what we started: ask the modules what they own, reap the dead.
            await asyncio.gather(
                *(
                    sup.reap_once()
                    for sup in self.services.values()
                    if sup.supported and sup.lifecycle != "manual"
                )
            )

    def start_loops(self) -> None:
        """Start the per-service loops and the probe monitors (after :meth:`recover`)."""
        if self._probe_tasks or any(sup.running_tasks for sup in self.services.values()):
            return
        for sup in self.services.values():
            sup.start_tasks(reaper=self._reaper)
        loop = asyncio.get_running_loop()
        for probe in self.probes.values():
            if probe.supported:
                self._probe_tasks.append(loop.create_task(self._run_probe(probe)))

    async def _run_probe(self, probe: ProbeMonitor) -> None:
        await probe.clock.sleep(probe.spec.period_s)
        await probe.run()

    async def shutdown(
        self,
        *,
        stop_services: bool = True,
        reap: bool = True,
        reap_liveness: Liveness | None = None,
    ) -> dict[str, ReapReport]:
        """Stop the loops, stop started services via the protocol, then reap once.

        ``reap_liveness`` overrides the manager's liveness for this final pass (an agent
        tearing down its own service may know that all its attempts are gone).
        """
        for task in self._probe_tasks:
            task.cancel()
        await asyncio.gather(*self._probe_tasks, return_exceptions=True)
        self._probe_tasks.clear()
        await asyncio.gather(*(sup.shutdown(stop=stop_services) for sup in self.services.values()))
        reports: dict[str, ReapReport] = {}
        if reap:
            for name, sup in self.services.items():
                if sup.supported and sup.lifecycle != "manual":
                    reports[name] = await sup.reap_once(reap_liveness)
        self._persist()
        self._started = False
        self._close_broker()
        return reports

    def _close_broker(self) -> None:
        """Stop answering the module (after its last op) and remove the socket's directory."""
        if self._broker_server is not None:
            self._broker_server.close()
            self._broker_server = None
        if self.broker_socket is not None:
            shutil.rmtree(self.broker_socket.parent, ignore_errors=True)

    async def __aenter__(self) -> ModuleManager:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # ------------------------------------------------------------------ admissions

    def _needed(
        self, request: AdmissionRequest
    ) -> tuple[list[ServiceSupervisor], list[ProbeMonitor]]:
        pools = set(request.pools) | set(request.needs_pools)
        known_pools = {p for s in self.services.values() for p in s.spec.pools}
        unknown = sorted(
            (request.needs - set(self.services) - set(self.probes)) | (pools - known_pools)
        )
        if unknown:
            raise UnknownCapability(
                f"module {self.manifest.name!r} on node {self.node_id!r} provides no "
                f"capability or pool named {', '.join(map(repr, unknown))}"
            )
        services = [
            sup
            for name, sup in self.services.items()
            if name in request.needs or pools & set(sup.spec.pools)
        ]
        probes = [p for name, p in self.probes.items() if name in request.needs]
        return services, probes

    async def admit(
        self, request: AdmissionRequest, *, timeout_s: float | None = None
    ) -> Admission:
        """Admit one attempt, or refuse it before launching anything (with the numbers)."""
        check_name(request.attempt_id, "attempt id")
        existing = self._admissions.get(request.attempt_id)
        if existing is not None:
            raise AdmissionRefused(f"attempt {request.attempt_id!r} is already admitted")
        services, probes = self._needed(request)
        _check_available(services, probes)
        await self._make_room(request, services)
        admission = self._reserve(request, services, probes)
        try:
            await asyncio.gather(
                *(sup.acquire(request.attempt_id, timeout_s=timeout_s) for sup in services)
            )
        except BaseException:
            self.release(request.attempt_id)
            raise
        return admission

    async def _make_room(
        self, request: AdmissionRequest, services: list[ServiceSupervisor]
    ) -> None:
        """Check pools and memory; when memory is short, yield idle services for it first.

        Yields only what is missing, and nothing when even every yield would not do.
        """
        try:
            self._check_resources(request, services)
        except MemoryExhausted as exc:
            shortfall = exc.needed_gb - exc.free_gb
            keep = {s.name for s in services}
            if shortfall <= 0 or self.yieldable_gb(exclude=keep) + 1e-9 < shortfall:
                raise
            await self.relieve_memory_pressure(shortfall, exclude=keep)
            await self.wait_yields()
            self._check_resources(request, services)

    def _reserve(
        self,
        request: AdmissionRequest,
        services: list[ServiceSupervisor],
        probes: list[ProbeMonitor],
    ) -> Admission:
        """Take the tokens and memory and record the admission.

        Synchronous on purpose: from the last check to here there is no await, so nobody
        can take the same tokens in between.
        """
        self.resources.reserve(request.attempt_id, request.pools)
        if request.mem_gb > 0:
            self.resources.charge(request.attempt_id, request.mem_gb)
        for sup in services:
            if sup.state != ServiceState.READY:
                sup.precharge()
        admission = Admission(
            request.attempt_id,
            tuple(s.name for s in services),
            tuple(p.name for p in probes),
            dict(request.pools),
        )
        self._admissions[request.attempt_id] = admission
        return admission

    def release(self, attempt_id: str) -> bool:
        """Release an attempt's users, tokens and memory; a second call is a no-op."""
        admission = self._admissions.pop(attempt_id, None)
        self.resources.release(attempt_id)
        if admission is None:
            return False
        for name in admission.services:
            self.services[name].release(attempt_id)
        return True

    def _memory_needed(
        self, request: AdmissionRequest, services: list[ServiceSupervisor]
    ) -> dict[str, float]:
        needed: dict[str, float] = {}
        if request.mem_gb > 0:
            needed[request.attempt_id] = request.mem_gb
        for sup in services:
            gb = sup.reserve_needed_gb()
            if gb > 0:
                needed[sup.memory_holder] = gb
        return needed

    def _check_resources(
        self, request: AdmissionRequest, services: list[ServiceSupervisor]
    ) -> None:
        self.resources.check_pools(request.pools, request.needs_pools)
        self.resources.check_memory(self._memory_needed(request, services))

    def yieldable_gb(self, *, exclude: set[str] | None = None) -> float:
        """What yielding every idle yieldable service (but ``exclude``) would free."""
        return sum(
            sup.yieldable_gb()
            for sup in self.services.values()
            if not (exclude and sup.name in exclude)
        )

    async def relieve_memory_pressure(
        self, needed: Mapping[str, float] | float, *, exclude: set[str] | None = None
    ) -> float:
        """Stop idle ``yieldable`` services until enough memory would be free.

        Returns the GB that the requested yields free. Services in ``exclude`` (the ones the
        pending admission needs) are never yielded.
        """
        amount = needed if isinstance(needed, float | int) else sum(needed.values())
        freed = 0.0
        for sup in self.services.values():
            if freed >= amount:
                break
            if exclude and sup.name in exclude:
                continue
            freed += sup.request_yield()
        return freed

    async def wait_yields(self) -> None:
        """Until every yield asked for has stopped its service (or failed to)."""
        for sup in self.services.values():
            if sup.yield_requested:
                await sup.wait_state(
                    ServiceState.STOPPED,
                    ServiceState.UNHEALTHY,
                    timeout_s=sup.spec.timeouts.stop or 120.0,
                )

    def needed_services(self, request: AdmissionRequest) -> set[str]:
        """The services an admission would use (never yielded to make room for it)."""
        services, _ = self._needed(request)
        return {s.name for s in services}

    # ------------------------------------------------------------------ inspection & control

    def service(self, name: str) -> ServiceSupervisor:
        try:
            return self.services[name]
        except KeyError:
            raise UnknownCapability(
                f"no service {name!r} in module {self.manifest.name!r}"
            ) from None

    async def doctor(self, reason: str = "doctor") -> dict[str, Capability]:
        """Re-check every capability now: each probe's and each service's fingerprint.

        The spec's "again after doctor-triggering events": an operator asking (``srt oarbank
        doctor``, SIGHUP to the node agent), or an admission refused for a capability that is
        unavailable, where the host may have been fixed since the last period. Probes run
        through their thresholds as usual; returns every capability with why it is (not)
        available.
        """
        self.events.emit(ManagerEvent("doctor", self.manifest.name, reason, self.clock.monotonic()))
        await asyncio.gather(
            *(p.check_once() for p in self.probes.values() if p.supported),
            *(s.refresh_fingerprint() for s in self.services.values() if s.supported),
        )
        return self.capability_report()

    def capability_report(self) -> dict[str, Capability]:
        out: dict[str, Capability] = {}
        for name, sup in self.services.items():
            ok, why = sup.availability()
            out[name] = Capability("service", ok, why or f"{sup.state}", sup.health)
        for name, probe in self.probes.items():
            detail = probe.last.detail if probe.last else probe.unavailable_reason()
            health = "healthy" if probe.last and probe.last.healthy else "unhealthy"
            if not probe.supported:
                health = "unsupported"
            out[name] = Capability("probe", probe.available, detail, health)
        return out

    def capabilities(self) -> dict[str, bool]:
        """Every service and probe name with whether it is available now."""
        out = {name: sup.availability()[0] for name, sup in self.services.items()}
        out.update({name: probe.available for name, probe in self.probes.items()})
        return out

    def reset(self, service: str) -> bool:
        return self.service(service).reset()

    async def reap_now(
        self, service: str | None = None, liveness: Liveness | None = None
    ) -> dict[str, ReapReport]:
        targets = [self.service(service)] if service else list(self.services.values())
        reports = {}
        for sup in targets:
            if sup.supported and sup.lifecycle != "manual":
                reports[sup.name] = await sup.reap_once(liveness)
        return reports

    def snapshot(self) -> ManagerSnapshot:
        return ManagerSnapshot(
            module=self.manifest.name,
            node_id=self.node_id,
            services={name: sup.snapshot() for name, sup in self.services.items()},
            probes={name: probe.available for name, probe in self.probes.items()},
            resources=self.resources.snapshot(),
            admissions=tuple(sorted(self._admissions)),
        )

    def persist(self) -> None:
        """Save every service's record now (also done on every state change)."""
        if self.store is None:
            return
        self.store.save({name: sup.record() for name, sup in self.services.items()})

    def _persist(self) -> None:
        if self._started:
            self.persist()
