"""The node agent: one module manager per bundle, on one host-memory budget.

It owns what spans modules: loading the bundles (one module name each), the state files
and their locks, the shared memory budget, admissions that touch several modules (all or
nothing), memory pressure relieved by idle yieldable services of *any* module, giving
yielded services their memory back, and the checked teardown. Names are resolved by
:mod:`.routing`, doctor runs scheduled by :mod:`.doctor`, the ``status`` answer built by
:mod:`.report`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oarbank_protocol.agent.node.doctor import Doctor
from oarbank_protocol.agent.node.report import node_status
from oarbank_protocol.agent.node.routing import ModuleWant, Router
from oarbank_protocol.errors import (
    AdmissionRefused,
    CapabilityUnavailable,
    ManifestError,
    MemoryExhausted,
    StateLocked,
)
from oarbank_protocol.execution.bundle import Bundle, load_bundle
from oarbank_protocol.execution.environment import SAFE_PATH
from oarbank_protocol.execution.sandbox import Confinement, SitePolicy
from oarbank_protocol.lifecycle.host_memory import HostLimits
from oarbank_protocol.lifecycle.manager import ModuleManager
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_protocol.lifecycle.reaper import Liveness, file_liveness, static_liveness
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.state_store import StateStore
from oarbank_protocol.lifecycle.states import ServiceState
from oarbank_protocol.names import check_name
from oarbank_protocol.numbers import is_finite_number

log = logging.getLogger("oarbank_protocol.agent.node")


@dataclass
class NodeAgentConfig:
    bundles: list[Path]
    node_id: str
    data_root: Path
    state_dir: Path
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: each module's granted host tools and its owner's caps (OARBANK_TOOLS_FILE, _LIMITS_)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    limits: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: variables of the agent's environment every executable also gets (a job's cookie)
    extra_env: dict[str, str] = field(default_factory=dict)
    mem_budget_gb: float | None = None
    live_attempts: Path | None = None
    platform: str | None = None
    path: str = SAFE_PATH
    #: what the site approves for sandboxed modules
    site: SitePolicy = field(default_factory=SitePolicy)
    options: SupervisorOptions = field(default_factory=SupervisorOptions)
    #: the host's real memory (None: the budget alone, as before it was measured)
    host_memory: HostLimits | None = field(default_factory=HostLimits)
    #: how often the host's memory is checked for pressure between admissions
    pressure_period_s: float = 2.0


class NodeAgent:
    def __init__(self, config: NodeAgentConfig) -> None:
        check_name(config.node_id, "node id")
        self.config = config
        self.resources = NodeResources(config.mem_budget_gb, host=config.host_memory)
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
        for what, given in (
            ("settings", config.settings),
            ("tools", config.tools),
            ("limits", config.limits),
        ):
            unknown = sorted(set(given) - set(self.bundles))
            if unknown:
                raise ManifestError(f"{what} for modules that are not loaded: {unknown}")
        self.stores: dict[str, StateStore] = {}
        self.managers: dict[str, ModuleManager] = {}
        #: each module's sandbox, for the status report
        self.confinements: dict[str, Confinement | None] = {}
        self.doctors = Doctor(self.managers)
        self.router = Router(config.node_id, self.managers)
        for name, bundle in self.bundles.items():
            context = bundle.context(
                node_id=config.node_id,
                data_dir=(config.data_root / name).resolve(),
                settings=config.settings.get(name, {}),
                tools=config.tools.get(name, {}),
                limits=config.limits.get(name, {}),
                extra_env=dict(config.extra_env),
                platform=config.platform,
                path=config.path,
                site=config.site,
            )
            self.confinements[name] = context.confinement
            store = StateStore((config.state_dir / f"{name}.state.json").resolve())
            self.stores[name] = store
            self.managers[name] = ModuleManager.for_bundle(
                bundle,
                context,
                store=store,
                liveness=self.liveness,
                resources=self.resources.scoped(name),
                options=config.options,
                on_event=lambda event, module=name: self.doctors.on_event(module, event),
            )
        #: attempts admitted for memory only, charged to the node rather than a module
        self._node_charges: set[str] = set()
        #: admissions in progress: the memory their yields free is theirs, not to hand back
        self._admitting = 0
        self._closing = False
        self._pressure_check_due = False
        self._pressure_task: asyncio.Task[None] | None = None
        self.resources.on_memory_freed(self._memory_freed)

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
        if self.config.host_memory is not None and self._pressure_task is None:
            self._pressure_task = asyncio.get_running_loop().create_task(
                self._watch_host_memory(), name="oarbank:host-memory"
            )

    async def _watch_host_memory(self) -> None:
        """Between admissions too: yield idle services while the host is short of memory
        (the rest of the host may need it, whatever the budget says), and give it back
        once the host has room again (nothing in the ledger tells of that)."""
        host = self.config.host_memory
        assert host is not None
        while not self._closing:
            await asyncio.sleep(self.config.pressure_period_s)
            if self._admitting or self._closing:
                continue
            try:
                reading = host.gauge()
            except Exception:
                log.exception("cannot read the host's memory; trying again")
                continue
            shortfall = host.shortfall_gb(reading)
            if shortfall > 0:
                freed = 0.0
                for manager in self.managers.values():
                    if freed >= shortfall:
                        break
                    freed += await manager.relieve_memory_pressure(shortfall - freed)
                if freed:
                    log.warning(
                        "host memory short (%.3g GB available, PSI some avg10 %s): "
                        "yielding %.3g GB of idle services",
                        reading.available_gb,
                        reading.psi_some_avg10,
                        freed,
                    )
            else:
                self._end_pressure_if_room()

    async def shutdown(self) -> bool:
        """Stop through the protocol, reap, check; True when nothing of ours is left."""
        self._closing = True
        if self._pressure_task is not None:
            self._pressure_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pressure_task
        await self.doctors.cancel()
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

    # ------------------------------------------------------------------ admission

    async def admit(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Admit one attempt across modules (all or nothing), making room in memory by
        yielding idle services of any module when that is enough; refusals raise."""
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
        parts = self.router.split(request)
        if any(attempt in m.snapshot().admissions for m in self.managers.values()) or (
            attempt in self._node_charges
        ):
            raise AdmissionRefused(f"attempt {attempt!r} is already admitted")
        wait = float(timeout) if timeout is not None else None
        self._admitting += 1
        try:
            return await self._admit_making_room(attempt, parts, float(mem_gb), wait)
        finally:
            self._admitting -= 1
            # Yields that turned out not to be needed (the admission failed later) give
            # their memory back now, as do yields whose end a free during the admission
            # had to leave for later.
            self._end_pressure_if_room()

    async def _admit_making_room(
        self,
        attempt: str,
        parts: dict[str, ModuleWant],
        mem_gb: float,
        wait: float | None,
    ) -> dict[str, Any]:
        try:
            return await self._admit_once(attempt, parts, mem_gb, wait)
        except MemoryExhausted as exc:
            # A module yields its own idle services for its admissions; the node's budget is
            # shared, so idle yieldable services of the *other* modules may make room too.
            shortfall = exc.needed_gb - exc.free_gb
            keep = {
                module: manager.needed_services(parts.get(module, ModuleWant()).request(attempt))
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
            return await self._admit_once(attempt, parts, mem_gb, wait)

    async def _admit_once(
        self,
        attempt: str,
        parts: dict[str, ModuleWant],
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
                admission = await self.managers[module].admit(
                    parts[module].request(attempt, mem_gb if index == 0 else 0.0),
                    timeout_s=timeout,
                )
                admitted.append(module)
                granted[module] = {
                    "services": list(admission.services),
                    "probes": list(admission.probes),
                    "pools": dict(admission.pools),
                }
        except CapabilityUnavailable as exc:
            self._undo(attempt, admitted)
            owner = next(
                (m for m in parts if exc.capability in self.managers[m].capabilities()), None
            )
            for module in [owner] if owner else list(parts):
                self.doctors.schedule(module, f"admission of {attempt} refused: {exc.reason}")
            raise
        except BaseException:
            self._undo(attempt, admitted)
            raise
        return {"attempt_id": attempt, "modules": granted}

    def _undo(self, attempt: str, admitted: list[str]) -> None:
        """Take back a partial admission: the modules that admitted it, the node's charge."""
        for module in admitted:
            self.managers[module].release(attempt)
        if attempt in self._node_charges:
            self._node_charges.discard(attempt)
            self.resources.release(f"attempt:{attempt}")

    def release(self, attempt: str) -> bool:
        released = False
        for manager in self.managers.values():
            released = manager.release(attempt) or released
        if attempt in self._node_charges:
            self._node_charges.discard(attempt)
            self.resources.release(f"attempt:{attempt}")
            released = True
        return released

    def _memory_freed(self) -> None:
        """A charge was dropped (a release, an idle stop, a crash): check, once per burst,
        whether yielded services fit again. Deferred to the loop, because the drop happens
        in the middle of someone's state change."""
        if self._pressure_check_due:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._end_pressure_if_room()
            return
        self._pressure_check_due = True
        loop.call_soon(self._deferred_pressure_check)

    def _deferred_pressure_check(self) -> None:
        self._pressure_check_due = False
        self._end_pressure_if_room()

    def _end_pressure_if_room(self) -> None:
        """Let yielded services run again, as many as the freed memory holds.

        Not while an admission is in progress (the memory its yields free is for it; its
        end checks again) nor while the agent is closing.
        """
        if self._admitting or self._closing:
            return
        free = self.resources.mem_free_gb()
        for manager in self.managers.values():
            for sup in manager.services.values():
                if not sup.yield_requested or sup.state == ServiceState.STOPPING:
                    # A yield still stopping frees its memory when done (and we hear of it).
                    continue
                need = sup.reserve_needed_gb()
                if free is None or need <= free + 1e-9:
                    sup.end_yield()
                    if free is not None:
                        free -= need

    # ------------------------------------------------------------------ inspection and control

    def reset(self, capability: str) -> bool:
        module, local = self.router.module_of(capability, pool=False)
        return self.managers[module].reset(local)

    def status(self) -> dict[str, Any]:
        return node_status(self.config.node_id, self.managers, self.resources, self.confinements)

    async def doctor(self, reason: str = "requested") -> dict[str, Any]:
        return await self.doctors.run_all(reason)
