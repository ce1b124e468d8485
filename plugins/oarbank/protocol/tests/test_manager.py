"""ModuleManager behaviour not tied to one fault-matrix row (fast, in-memory ops)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from oarbank_protocol.documents import Fingerprint
from oarbank_protocol.errors import (
    AdmissionRefused,
    AdmissionTimeout,
    CapabilityUnavailable,
    MemoryExhausted,
    UnknownCapability,
)
from oarbank_protocol.lifecycle.clock import FakeClock
from oarbank_protocol.lifecycle.events import ManagerEvent
from oarbank_protocol.lifecycle.manager import AdmissionRequest, ModuleManager
from oarbank_protocol.lifecycle.probes import ProbeMonitor, check_probe
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.state_store import StateStore
from oarbank_protocol.lifecycle.supervisor import ServiceState, SupervisorOptions
from oarbank_protocol.manifest import ModuleManifest
from oarbank_testkit import NODE, FakeOps, drive, exec_error, run, service_entry

pytestmark = pytest.mark.timeout(60)

QUIET = SupervisorOptions(refingerprint_initial_s=3600, reap_period_s=3600)


def build(
    services: list[dict[str, Any]],
    ops: dict[str, FakeOps],
    *,
    clock: FakeClock | None = None,
    resources: NodeResources | None = None,
    platform: str | None = None,
    probes: list[dict[str, Any]] | None = None,
    probe_ops: dict[str, FakeOps] | None = None,
    options: SupervisorOptions = QUIET,
    store: StateStore | None = None,
    on_event: Callable[[ManagerEvent], None] | None = None,
) -> ModuleManager:
    manifest = ModuleManifest.model_validate(
        {"name": "m", "services": services, "probes": probes or []}
    )
    return ModuleManager(
        manifest,
        node_id=NODE,
        ops_factory=lambda spec: ops[spec.name],
        probe_factory=(lambda spec: (probe_ops or {})[spec.name]),
        clock=clock,
        resources=resources,
        options=options,
        platform=platform,
        store=store,
        on_event=on_event,
    )


def test_yieldable_idle_service_is_stopped_under_memory_pressure() -> None:
    cache, vm = FakeOps("cache"), FakeOps("vm")
    cache.mem_gb, vm.mem_gb = 6.0, 8.0

    async def main() -> None:
        clock = FakeClock()
        manager = build(
            [
                service_entry(
                    "cache",
                    exec=["x"],
                    reserves_host_memory=True,
                    yieldable=True,
                    idle_timeout_s=600,
                ),
                service_entry("vm", exec=["x"], reserves_host_memory=True),
            ],
            {"cache": cache, "vm": vm},
            clock=clock,
            resources=NodeResources(mem_budget_gb=10),
        )
        await manager.start()
        try:
            await drive(clock, manager.admit(AdmissionRequest("a1", needs=frozenset({"cache"}))))
            manager.release("a1")  # idle, but inside its 600 s idle window
            assert manager.resources.mem_charged_gb == 6.0
            await drive(clock, manager.admit(AdmissionRequest("a2", needs=frozenset({"vm"}))))
            assert manager.services["cache"].state == ServiceState.STOPPED
            assert manager.services["vm"].state == ServiceState.READY
            assert manager.resources.mem_charged_gb == 8.0
            assert "yielded under memory pressure" in manager.services["cache"].reason
            # A service in use is never yielded: now nothing fits.
            with pytest.raises(MemoryExhausted, match="need 6 GB"):
                await manager.admit(AdmissionRequest("a3", needs=frozenset({"cache"})))
        finally:
            await manager.shutdown()

    run(main())


def test_memory_pressure_yields_only_what_is_missing_and_nothing_in_vain() -> None:
    small, big = FakeOps("small"), FakeOps("big")
    small.mem_gb, big.mem_gb = 2.0, 3.0

    def entry(name: str) -> dict[str, Any]:
        return service_entry(
            name, exec=["x"], reserves_host_memory=True, yieldable=True, idle_timeout_s=600
        )

    async def main() -> None:
        clock = FakeClock()
        manager = build(
            [entry("small"), entry("big")],
            {"small": small, "big": big},
            clock=clock,
            resources=NodeResources(mem_budget_gb=8),
        )
        await manager.start()
        try:
            for name in ("small", "big"):
                await drive(clock, manager.admit(AdmissionRequest(name, needs=frozenset({name}))))
                manager.release(name)
            assert manager.resources.mem_charged_gb == 5.0
            # 9 GB can never fit in 8: nothing is yielded for it.
            with pytest.raises(MemoryExhausted):
                await manager.admit(AdmissionRequest("huge", mem_gb=9))
            assert small.count("stop") == big.count("stop") == 0
            # 4 GB needs 1 more than is free: one yield (of the first that frees enough).
            await drive(clock, manager.admit(AdmissionRequest("job", mem_gb=4)))
            stopped = [n for n in ("small", "big") if manager.services[n].state == "stopped"]
            assert stopped == ["small"], stopped
        finally:
            await manager.shutdown()

    run(main())


def test_admission_errors_are_specific() -> None:
    svc = FakeOps()
    svc.pools = {"slots": 1}

    async def main() -> None:
        clock = FakeClock()
        manager = build([service_entry(exec=["x"], pools=["slots"])], {"svc": svc}, clock=clock)
        await manager.start()
        try:
            with pytest.raises(UnknownCapability, match="'gpu'"):
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"gpu"})))
            with pytest.raises(UnknownCapability, match="'tpu'"):
                await manager.admit(AdmissionRequest("a1", pools={"tpu": 1}))
            await drive(
                clock, manager.admit(AdmissionRequest("a1", needs_pools=frozenset({"slots"})))
            )
            with pytest.raises(AdmissionRefused, match="already admitted"):
                await manager.admit(AdmissionRequest("a1"))
            with pytest.raises(ValueError):
                await manager.admit(AdmissionRequest("../evil"))
            assert manager.release("a1")
            assert not manager.release("a1")
            assert not manager.release("never-admitted")
        finally:
            await manager.shutdown()

    run(main())


def test_admission_timeout_releases_the_user() -> None:
    svc = FakeOps()
    svc.ready_polls_needed = 10**9  # never ready

    async def main() -> None:
        clock = FakeClock()
        manager = build(
            [service_entry(exec=["x"], ready_timeout_s=10_000)], {"svc": svc}, clock=clock
        )
        await manager.start()
        try:
            task = asyncio.ensure_future(
                manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})), timeout_s=3)
            )
            for _ in range(10):
                await clock.advance(1)
            with pytest.raises(AdmissionTimeout, match="not ready within 3 s"):
                await task
            assert manager.services["svc"].users == {}
            assert manager.resources.snapshot().reserved == {}
        finally:
            await manager.shutdown()

    run(main())


def test_unsupported_platform_is_never_run() -> None:
    svc = FakeOps()

    async def main() -> None:
        manager = build(
            [service_entry(exec=["x"], platforms=["darwin"])], {"svc": svc}, platform="linux-x86_64"
        )
        await manager.start()
        try:
            assert manager.services["svc"].state == ServiceState.UNSUPPORTED
            with pytest.raises(CapabilityUnavailable, match="not supported"):
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})))
        finally:
            await manager.shutdown()

    run(main())
    assert svc.calls == []


def test_probe_monitor_and_check_probe() -> None:
    jdk = FakeOps("jdk")

    async def main() -> None:
        outcome = await check_probe(jdk)
        assert outcome.healthy
        assert isinstance(outcome.fingerprint, Fingerprint)
        jdk.fingerprint_error = exec_error("fingerprint", "no java on PATH")
        outcome = await check_probe(jdk)
        assert not outcome.healthy
        assert outcome.detail == "no java on PATH"
        jdk.fingerprint_error = None
        manager = build(
            [], {}, probes=[{"name": "jdk", "exec": ["x"], "period_s": 5}], probe_ops={"jdk": jdk}
        )
        await manager.start()
        try:
            assert manager.capabilities() == {"jdk": True}
            await manager.admit(AdmissionRequest("a1", needs=frozenset({"jdk"})))
            manager.release("a1")
            probe: ProbeMonitor = manager.probes["jdk"]
            before = probe.checks
            probe.trigger()
        finally:
            await manager.shutdown()
        assert probe.checks >= before

    run(main())


def test_snapshot_and_shutdown_reports() -> None:
    svc = FakeOps()
    svc.add_object("o1", "dead")

    async def main() -> None:
        clock = FakeClock()
        manager = build([service_entry(exec=["x"], lifecycle="always")], {"svc": svc}, clock=clock)
        await manager.start()
        await clock.advance(0.1)
        snap = manager.snapshot()
        assert snap.services["svc"].state == "ready"
        assert snap.services["svc"].available
        reports = await manager.reap_now()
        assert reports["svc"].skipped == "no liveness source configured"
        assert svc.objects
        from oarbank_protocol.lifecycle.reaper import static_liveness

        final = await manager.shutdown(reap_liveness=static_liveness(()))
        assert final["svc"].destroyed == ["o1"]
        assert manager.services["svc"].state == ServiceState.STOPPED

    run(main())


def test_fingerprint_failure_at_recovery_never_starts_blind() -> None:
    svc = FakeOps()
    svc.fingerprint_error = exec_error("fingerprint", "timed out")

    async def main() -> None:
        clock = FakeClock()
        manager = build(
            [service_entry(exec=["x"], lifecycle="always")],
            {"svc": svc},
            clock=clock,
            options=SupervisorOptions(refingerprint_initial_s=1, reap_period_s=3600),
        )
        await manager.start()
        try:
            await clock.advance(5)
            assert svc.count("start") == 0, "started without knowing whether it already runs"
            svc.fingerprint_error = None
            svc.running = True  # it was running all along
            for _ in range(5):
                await clock.advance(1)
            sup = manager.services["svc"]
            assert sup.state == ServiceState.READY
            assert sup.adopted
            assert svc.count("start") == 0
        finally:
            await manager.shutdown(stop_services=False)

    run(main())


def test_every_event_is_announced_after_the_state_file_says_the_same(tmp_path: Path) -> None:
    """An agent killed right after it announced "ready" must find that fact on disk.

    Event observers (the agent's status file, srt) act on an event at once; if the state
    file lagged behind, a restarted agent would read an older record (no PID) and could not
    guard against PID reuse.
    """
    svc = FakeOps()
    store = StateStore(tmp_path / "state.json")
    keys = ("state", "pid", "restart_count", "start_attempts")
    seen: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    holder: list[ModuleManager] = []

    def observe(event: ManagerEvent) -> None:
        if not holder or event.kind not in ("ready", "stopped", "started"):
            return
        saved = store.load().services.get("svc", {})
        live = holder[0].services["svc"].record()
        seen.append((event.kind, {k: saved.get(k) for k in keys}, {k: live.get(k) for k in keys}))

    async def main() -> None:
        clock = FakeClock()
        manager = build(
            [service_entry(exec=["x"], lifecycle="always")],
            {"svc": svc},
            clock=clock,
            store=store,
            on_event=observe,
        )
        holder.append(manager)
        await manager.start()
        try:
            await clock.advance(0.1)
            assert manager.services["svc"].state == ServiceState.READY
        finally:
            await manager.shutdown(stop_services=True)

    run(main())
    kinds = [kind for kind, _, _ in seen]
    assert "ready" in kinds and "stopped" in kinds, seen
    for kind, saved, live in seen:
        assert saved == live, f"{kind} announced before it was saved: {saved} != {live}"
