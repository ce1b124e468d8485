"""Fault matrix rows L01-L09: lifecycles, pools and reaping."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping

import pytest
from oarbank_protocol.documents import LABEL_ATTEMPT, LABEL_NODE, LABEL_SERVICE, OwnedObject
from oarbank_protocol.errors import (
    CapabilityUnavailable,
    MemoryExhausted,
    PoolExhausted,
    ServiceStartFailed,
)
from oarbank_protocol.lifecycle.clock import FakeClock
from oarbank_protocol.lifecycle.manager import AdmissionRequest, ModuleManager
from oarbank_protocol.lifecycle.reaper import (
    LivenessUnknown,
    ReapPolicy,
    ReapReport,
    select_candidates,
    static_liveness,
)
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.supervisor import ServiceState, SupervisorOptions
from oarbank_protocol.manifest import ModuleManifest
from oarbank_testkit import (
    NODE,
    FakeBundle,
    FakeOps,
    advance_until,
    async_wait_until,
    drive,
    exec_error,
    manager_for,
    run,
    service_entry,
)

pytestmark = pytest.mark.timeout(60)

BundleFactory = Callable[..., FakeBundle]
FAST = SupervisorOptions(refingerprint_initial_s=0.1, refingerprint_max_s=0.2, reap_period_s=3600)


def needs(*names: str) -> frozenset[str]:
    return frozenset(names)


# --------------------------------------------------------------------------- L01


def test_L01_on_demand_refcount_and_idle_timeout(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry(idle_timeout_s=30)])

    async def main() -> None:
        clock = FakeClock()
        manager = manager_for(fake, clock=clock, options=FAST)
        await manager.start()
        sup = manager.services["svc"]
        try:
            await drive(clock, manager.admit(AdmissionRequest("A", needs=needs("svc"))))
            await drive(clock, manager.admit(AdmissionRequest("B", needs=needs("svc"))))
            assert sup.snapshot().users == ("A", "B")
            assert manager.release("A") is True
            await clock.advance(100)
            await asyncio.sleep(0.2)
            assert sup.state == ServiceState.READY, "stopped while B still used it"
            assert manager.release("B") is True
            assert manager.release("B") is False, "double release must be a no-op"
            assert sup.snapshot().users == ()
            await clock.advance(29)
            await asyncio.sleep(0.2)
            assert sup.state == ServiceState.READY, "stopped before idle_timeout_s"
            await drive(clock, manager.admit(AdmissionRequest("C", needs=needs("svc"))))
            manager.release("C")
            await clock.advance(29)
            await asyncio.sleep(0.2)
            assert sup.state == ServiceState.READY, (
                "the admission during the idle window did not cancel the stop"
            )
            assert fake.calls("stop") == []
            assert await advance_until(clock, lambda: sup.state == ServiceState.STOPPED, step=0.5)
            assert len(fake.calls("start")) == 1
            assert len(fake.calls("stop")) == 1
        finally:
            await manager.shutdown()

    run(main())


def test_L01_idle_timeout_real_time(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry(idle_timeout_s=0.5)])

    async def main() -> float:
        manager = manager_for(fake, options=FAST)
        await manager.start()
        sup = manager.services["svc"]
        try:
            await manager.admit(AdmissionRequest("A", needs=needs("svc")))
            manager.release("A")
            released = time.monotonic()
            assert await async_wait_until(lambda: sup.state == ServiceState.STOPPED, 5)
            return time.monotonic() - released
        finally:
            await manager.shutdown()

    elapsed = run(main())
    assert 0.45 <= elapsed <= 2.5


# --------------------------------------------------------------------------- L02


def test_L02_always_service_killed_outside_is_restarted(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry(lifecycle="always")])

    async def main() -> None:
        manager = manager_for(fake, options=FAST)
        await manager.start()
        sup = manager.services["svc"]
        try:
            assert await sup.wait_state(ServiceState.READY, timeout_s=5)
            first = fake.service_pid()
            assert first is not None
            os.kill(first, signal.SIGKILL)
            assert await async_wait_until(
                lambda: sup.state == ServiceState.READY and sup.restart_count == 1, 5
            )
            assert fake.service_pid() not in (None, first)
            assert "exited_unexpectedly" in manager.events.kinds("svc")
            scheduled = manager.events.of("restart_scheduled", "svc")[0]
            assert 0.075 <= scheduled.data["delay_s"] <= 0.125, "initial backoff 0.1 s +- 25 %"
        finally:
            await manager.shutdown()

    run(main())


# --------------------------------------------------------------------------- L03


def test_L03_manual_service_crash_is_not_restarted(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry(lifecycle="manual", fingerprint_period_s=0.1)])
    operator = fake.client()

    async def main() -> None:
        await operator.start()
        manager = manager_for(fake, options=FAST)
        await manager.start()
        sup = manager.services["svc"]
        try:
            assert sup.state == ServiceState.READY
            assert manager.capabilities() == {"svc": True}
            admission = await manager.admit(AdmissionRequest("A", needs=needs("svc")))
            assert admission.services == ("svc",)
            manager.release("A")
            pid = fake.service_pid()
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            assert await async_wait_until(lambda: sup.state == ServiceState.FAILED, 5)
            assert manager.capabilities() == {"svc": False}
            with pytest.raises(CapabilityUnavailable, match="failed"):
                await manager.admit(AdmissionRequest("B", needs=needs("svc")))
            await asyncio.sleep(0.5)
            assert sup.snapshot().state == "failed"
            assert len(fake.calls("start")) == 1, "the agent started a manual service"
            await operator.start()  # the operator acts
            assert await async_wait_until(lambda: sup.state == ServiceState.READY, 5)
            assert manager.capabilities() == {"svc": True}
        finally:
            await manager.shutdown()
        assert fake.calls("stop") == [], "the agent stopped a manual service"
        await operator.stop()

    run(main())


# --------------------------------------------------------------------------- L04


def test_L04_unhealthy_withdraws_and_recovery_restores(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("start", exit_code=1)

    async def main() -> None:
        manager = manager_for(fake, options=FAST)
        await manager.start()
        sup = manager.services["svc"]
        try:
            with pytest.raises(ServiceStartFailed, match="3 failures within"):
                await manager.admit(AdmissionRequest("A", needs=needs("svc")))
            assert len(fake.calls("start")) == 3
            assert sup.state == ServiceState.UNHEALTHY
            with pytest.raises(CapabilityUnavailable) as info:
                await manager.admit(AdmissionRequest("B", needs=needs("svc")))
            assert "service is unhealthy" in str(info.value)
            assert "svc" in str(info.value)
            # The module reports trouble, then recovery: non-healthy -> healthy restores it.
            fake.update_config(health="unhealthy", detail="disk full")
            assert await async_wait_until(lambda: sup.health == "unhealthy", 5)
            fake.set_op("start")
            fake.update_config(health="healthy", detail="")
            assert await async_wait_until(lambda: sup.state == ServiceState.STOPPED, 5)
            assert manager.capabilities() == {"svc": True}
            await manager.admit(AdmissionRequest("C", needs=needs("svc")))
            assert sup.snapshot().state == "ready"
            kinds = manager.events.kinds("svc")
            assert kinds.count("unhealthy") == 1
            assert "recovered" in kinds
            manager.release("C")
        finally:
            await manager.shutdown()

    run(main())


def test_L04_operator_reset_clears_unhealthy() -> None:
    ops = FakeOps()
    ops.start_error = exec_error("start", "crashed")

    async def main() -> None:
        manifest = ModuleManifest.model_validate(
            {"name": "m", "services": [service_entry(exec=["x"])]}
        )
        manager = ModuleManager(manifest, node_id=NODE, ops_factory=lambda spec: ops, options=FAST)
        await manager.start()
        try:
            with pytest.raises(ServiceStartFailed):
                await manager.admit(AdmissionRequest("A", needs=needs("svc")))
            ops.start_error = None
            assert manager.reset("svc") is True
            await manager.admit(AdmissionRequest("B", needs=needs("svc")))
            assert manager.services["svc"].state == ServiceState.READY
        finally:
            await manager.shutdown()

    run(main())


# --------------------------------------------------------------------------- L05


def test_L05_flapping_probe_does_not_churn(
    bundle_factory: BundleFactory, caplog: pytest.LogCaptureFixture
) -> None:
    fake = bundle_factory(
        probes=[{"name": "jdk", "exec": ["bin/fake"], "period_s": 10, "failure_threshold": 3}],
        config={"services": {"jdk": {"health_sequence": ["healthy", "unhealthy"]}}},
    )

    async def main() -> None:
        clock = FakeClock()
        manager = manager_for(fake, clock=clock)
        caplog.set_level(logging.INFO, logger="oarbank_protocol.lifecycle")
        await manager.start()
        probe = manager.probes["jdk"]

        def checks_at(n: int) -> Callable[[], bool]:
            return lambda: probe.checks == n

        try:
            assert probe.available
            for i in range(8):
                await clock.advance(10)
                assert await async_wait_until(checks_at(i + 2), 5)
                # Availability follows every report (the protocol: available while the
                # probe reports healthy); only the announcement waits for the threshold.
                assert probe.available is (i % 2 == 1), f"check {i + 2}"
            fake.update_config(services={"jdk": {"health": "unhealthy", "detail": "no JDK"}})
            for i in range(3):
                await clock.advance(10)
                assert await async_wait_until(checks_at(10 + i), 5)
            assert not probe.available
            assert "no JDK" in probe.unavailable_reason()
            with pytest.raises(CapabilityUnavailable, match="jdk"):
                await manager.admit(AdmissionRequest("A", needs=needs("jdk")))
        finally:
            await manager.shutdown()
        kinds = [k for k in manager.events.kinds("jdk") if k.startswith("capability")]
        assert kinds == ["capability_restored", "capability_withdrawn"]
        lines = [r for r in caplog.records if r.getMessage().startswith("jdk ")]
        assert len(lines) == 2, "only state changes may be logged"

    run(main())


def test_L05_capability_withdrawn_at_the_first_unhealthy_report(
    bundle_factory: BundleFactory,
) -> None:
    """A failure threshold of 3 delays the announcement, never the withdrawal: an admission
    needing the capability is refused right after the first unhealthy report."""
    fake = bundle_factory(
        probes=[{"name": "jdk", "exec": ["bin/fake"], "period_s": 10, "failure_threshold": 3}],
    )

    async def main() -> None:
        clock = FakeClock()
        manager = manager_for(fake, clock=clock)
        await manager.start()
        probe = manager.probes["jdk"]
        try:
            assert probe.available
            await manager.admit(AdmissionRequest("before", needs=needs("jdk")))
            fake.update_config(services={"jdk": {"health": "unhealthy", "detail": "JDK gone"}})
            await clock.advance(10)
            assert await async_wait_until(lambda: probe.checks == 2, 5)
            with pytest.raises(CapabilityUnavailable, match="JDK gone"):
                await manager.admit(AdmissionRequest("after", needs=needs("jdk")))
            assert manager.capabilities()["jdk"] is False
            assert "capability_withdrawn" not in manager.events.kinds("jdk"), "announced early"
        finally:
            await manager.shutdown()

    run(main())


# --------------------------------------------------------------------------- L06


def test_L06_refused_before_launch_with_pool_and_numbers(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(
        services=[
            service_entry("runtime", pools=["slots"]),
            service_entry("vm", reserves_host_memory=True),
        ],
        config={"services": {"runtime": {"pools": {"slots": 2}}, "vm": {"reserve_mem_gb": 6}}},
    )

    async def main() -> None:
        manager = manager_for(fake, options=FAST, resources=NodeResources(mem_budget_gb=4))
        await manager.start()
        try:
            await manager.admit(AdmissionRequest("a1", pools={"slots": 2}))
            with pytest.raises(PoolExhausted) as info:
                await manager.admit(AdmissionRequest("a2", pools={"slots": 1}))
            assert str(info.value) == (
                "pool 'slots' exhausted: requested 1 token(s), 0 free of 2 (2 reserved)"
            )
            with pytest.raises(MemoryExhausted) as mem:
                await manager.admit(AdmissionRequest("a3", needs=needs("vm")))
            assert "need 6 GB" in str(mem.value)
            assert "0 GB free of 4 GB" not in str(mem.value)
            assert "4 GB free of 4 GB" in str(mem.value)
            assert fake.calls("start", "vm") == [], "refused admission launched the vm"
            assert len(fake.calls("start", "runtime")) == 1
            manager.release("a1")
            await manager.admit(AdmissionRequest("a2", pools={"slots": 1}))
            manager.release("a2")
        finally:
            await manager.shutdown()

    run(main())


def test_L06_tokens_return_to_baseline_after_100_crash_cycles() -> None:
    ops = FakeOps()
    ops.pools = {"slots": 4}
    ops.mem_gb = 2.0

    async def main() -> None:
        clock = FakeClock()
        manifest = ModuleManifest.model_validate(
            {
                "name": "m",
                "services": [
                    service_entry(
                        exec=["x"],
                        pools=["slots"],
                        reserves_host_memory=True,
                        restart={
                            "backoff_initial_s": 1,
                            "backoff_max_s": 1,
                            "max_failures": 1000,
                            "window_s": 1,
                        },
                    )
                ],
            }
        )
        resources = NodeResources(mem_budget_gb=16)
        manager = ModuleManager(
            manifest,
            node_id=NODE,
            ops_factory=lambda s: ops,
            clock=clock,
            resources=resources,
            options=FAST,
        )
        await manager.start()
        sup = manager.services["svc"]
        baseline = resources.snapshot()
        try:
            for cycle in range(100):
                task = asyncio.ensure_future(
                    manager.admit(AdmissionRequest(f"a{cycle}", pools={"slots": 2}, mem_gb=1))
                )
                await clock.advance(2)
                assert task.done(), f"cycle {cycle}: admission did not finish"
                task.result()
                assert resources.mem_charged_gb == 3.0
                ops.crash()
                await clock.advance(1)  # status check notices, backoff, restart
                await clock.advance(2)
                manager.release(f"a{cycle}")
            assert sup.restart_count >= 100
            await clock.advance(10)
        finally:
            await manager.shutdown()
        after = resources.snapshot()
        assert after.reserved == baseline.reserved == {}
        assert after.charges == {}
        assert after.capacity == baseline.capacity == {"slots": 4}

    run(main())


# --------------------------------------------------------------------------- L07


def _labels(attempt: str, node: str = NODE, service: str = "svc") -> dict[str, str]:
    return {LABEL_ATTEMPT: attempt, LABEL_NODE: node, LABEL_SERVICE: service}


def test_L07_reaper_destroys_only_dead_attempts_of_this_node(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()], config={"destroy_fails": ["o7"]})
    fake.set_objects(
        [
            {"id": "o1", "kind": "c", "labels": _labels("dead-1")},
            {"id": "o2", "kind": "c", "labels": _labels("live-1")},
            {"id": "o3", "kind": "c", "labels": _labels("dead-1", node="node-2")},
            {"id": "o4", "kind": "c"},
            {"id": "o5", "kind": "c", "labels": _labels("dead-1"), "uid": 54321},
            {"id": "o6", "kind": "c", "labels": _labels("dead-1", service="other")},
            {"id": "o7", "kind": "c", "labels": _labels("dead-2")},
        ]
    )
    asked: list[frozenset[str]] = []

    async def liveness(attempts: frozenset[str]) -> Mapping[str, bool]:
        asked.append(attempts)
        return await static_liveness({"live-1"})(attempts)

    async def main() -> None:
        manager = manager_for(fake, options=FAST, liveness=liveness)
        await manager.start()
        sup = manager.services["svc"]
        try:
            first = await sup.reap_once()
            assert first.destroyed == ["o1"]
            assert set(first.failed) == {"o7"}
            assert (first.live, first.ignored_unlabelled, first.ignored_foreign) == (1, 1, 3)
            assert asked == [frozenset({"live-1", "dead-1", "dead-2"})]
            fake.update_config(destroy_fails=[])
            second = await sup.reap_once()
            assert second.destroyed == ["o7"], "the partial failure was not retried"
            third = await sup.reap_once()
            assert third.destroyed == []
            assert third.failed == {}
            assert sorted(o["id"] for o in fake.objects()) == ["o2", "o3", "o4", "o5", "o6"]
            # Never concurrent with start: a slow start and a reap requested meanwhile.
            fake.set_op("start", sleep_s=0.4)
            admit = asyncio.ensure_future(manager.admit(AdmissionRequest("X", needs=needs("svc"))))
            assert await async_wait_until(lambda: bool(fake.calls("start")), 5)
            await sup.reap_once()
            await admit
            start_end = fake.calls("start", event="end")[0]["mono"]
            last_list = fake.calls("list_owned")[-1]["mono"]
            assert last_list >= start_end, "list_owned ran while start was in progress"
            manager.release("X")
        finally:
            await manager.shutdown()
        destroyed = [c["argv"][1] for c in fake.calls("destroy")]
        assert set(destroyed) == {"o1", "o7"}

    run(main())


def test_L07_reaper_period_real_time(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_objects([{"id": "o1", "kind": "c", "labels": _labels("gone")}])

    async def main() -> float:
        options = SupervisorOptions(reap_period_s=0.3)
        manager = manager_for(fake, options=options, liveness=static_liveness(()))
        began = time.monotonic()
        await manager.start()
        try:
            assert await async_wait_until(lambda: fake.objects() == [], 5)
            return time.monotonic() - began
        finally:
            await manager.shutdown(reap=False)

    elapsed = run(main())
    assert 0.25 <= elapsed <= 3.0


# --------------------------------------------------------------------------- L08


@pytest.mark.parametrize("failure", ["raises", "hangs"])
def test_L08_unknown_liveness_reaps_nothing(
    bundle_factory: BundleFactory, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_objects([{"id": "o1", "kind": "c", "labels": _labels("a-1")}])

    async def liveness(attempts: frozenset[str]) -> Mapping[str, bool]:
        if failure == "raises":
            raise LivenessUnknown(
                "squeue: slurm_load_jobs error: Unable to contact slurm controller"
            )
        await asyncio.sleep(60)
        return {}

    async def main() -> ReapReport:
        options = SupervisorOptions(liveness_timeout_s=0.3, reap_period_s=3600)
        manager = manager_for(fake, options=options, liveness=liveness)
        await manager.start()
        try:
            with caplog.at_level(logging.WARNING):
                return await manager.services["svc"].reap_once()
        finally:
            await manager.shutdown(reap=False)

    report = run(main())
    assert report.destroyed == []
    assert report.skipped
    assert fake.calls("destroy") == []
    assert [o["id"] for o in fake.objects()] == ["o1"]
    assert "not reaping this period" in caplog.text


# --------------------------------------------------------------------------- L09


def test_L09_ten_thousand_ids_are_bounded(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(
        services=[service_entry()],
        config={"generate_objects": {"count": 10_000, "attempts": 500, "attempt_prefix": "dead"}},
    )
    calls: list[int] = []

    async def liveness(attempts: frozenset[str]) -> Mapping[str, bool]:
        calls.append(len(attempts))
        return dict.fromkeys(attempts, False)

    async def main() -> ReapReport:
        options = SupervisorOptions(max_destroys_per_period=20, reap_period_s=3600)
        manager = manager_for(fake, options=options, liveness=liveness)
        await manager.start()
        try:
            return await manager.services["svc"].reap_once()
        finally:
            await manager.shutdown(reap=False)

    began = time.monotonic()
    report = run(main())
    assert time.monotonic() - began < 10
    assert report.listed == 10_000
    assert report.dead == 10_000
    assert len(report.destroyed) + len(report.failed) == 20
    assert report.deferred == 9_980
    assert calls == [500], "liveness must be asked once per period with distinct attempts"
    assert len(fake.calls("destroy")) == 20


def test_L09_candidate_selection_is_linear() -> None:
    policy = ReapPolicy(node_id=NODE, service="svc")
    small = [OwnedObject(id=f"o{i}", kind="c", labels=_labels(f"a{i}")) for i in range(2_000)]
    large = [OwnedObject(id=f"o{i}", kind="c", labels=_labels(f"a{i}")) for i in range(20_000)]
    t0 = time.perf_counter()
    select_candidates(small, policy, ReapReport("svc"))
    t1 = time.perf_counter()
    select_candidates(large, policy, ReapReport("svc"))
    t2 = time.perf_counter()
    assert (t2 - t1) < 40 * max(t1 - t0, 1e-4), "10x the objects took far more than 10x the time"
