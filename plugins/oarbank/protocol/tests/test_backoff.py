"""Restart backoff, max_failures in a window, backoff reset and clock jumps (F05, F06, F26)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest
from oarbank_protocol.lifecycle.clock import FakeClock
from oarbank_protocol.lifecycle.manager import ModuleManager
from oarbank_protocol.lifecycle.restart import RestartBudget
from oarbank_protocol.lifecycle.supervisor import ServiceState, ServiceSupervisor, SupervisorOptions
from oarbank_protocol.manifest import ModuleManifest, RestartSpec
from oarbank_testkit import NODE, FakeOps, exec_error, run, service_entry

pytestmark = pytest.mark.timeout(60)

QUIET = SupervisorOptions(refingerprint_initial_s=3600, reap_period_s=3600)


def manager(ops: FakeOps, clock: FakeClock | None = None, **service: Any) -> ModuleManager:
    manifest = ModuleManifest.model_validate(
        {"name": "m", "services": [service_entry(exec=["x"], **service)]}
    )
    return ModuleManager(
        manifest,
        node_id=NODE,
        ops_factory=lambda spec: ops,
        clock=clock,
        options=QUIET,
        rng=random.Random(7),
    )


def in_state(sup: ServiceSupervisor, state: ServiceState) -> bool:
    """A function call, so type checkers do not narrow ``sup.state`` across awaits."""
    return sup.state == state


class Now:
    """A settable monotonic clock for the pure budget."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def budget(policy: RestartSpec, seed: int | None = None) -> tuple[RestartBudget, Now]:
    now = Now()
    return RestartBudget(policy, now, random.Random(seed)), now


def test_tracker_delays_double_up_to_the_cap() -> None:
    policy = RestartSpec(backoff_initial_s=1, backoff_max_s=8, jitter=0, max_failures=100)
    b, now = budget(policy)
    delays = []
    for t in range(7):
        now.t = float(t)
        delays.append(b.on_failure().delay_s)
    assert delays == [1, 2, 4, 8, 8, 8, 8]


def test_tracker_jitter_stays_in_bounds() -> None:
    policy = RestartSpec(
        backoff_initial_s=10, backoff_max_s=300, jitter=0.25, max_failures=1000, window_s=1
    )
    b, now = budget(policy, 1)
    for n in range(1, 60):
        now.t = n * 10.0
        decision = b.on_failure()
        base = min(10 * 2 ** (n - 1), 300)
        assert base <= decision.delay_s <= base * 1.25


def test_tracker_counts_failures_in_a_sliding_window() -> None:
    policy = RestartSpec(backoff_initial_s=1, backoff_max_s=1, max_failures=3, window_s=60)
    b, now = budget(policy)
    for t, gives_up in ((0, False), (30, False), (70, False), (80, True)):
        now.t = t
        assert b.on_failure().give_up is gives_up, t


def test_budget_survives_a_round_trip_through_the_state_file() -> None:
    policy = RestartSpec(backoff_initial_s=1, backoff_max_s=8, jitter=0, max_failures=10)
    b, now = budget(policy)
    for t in (1.0, 2.0, 3.0):
        now.t = t
        b.on_failure()
    again, now2 = budget(policy)
    again.restore(b.to_record())
    now2.t = 4.0
    assert again.on_failure().delay_s == 8, "the doubling streak was restored"
    assert again.failures_in_window() == 4
    broken, _ = budget(policy)
    broken.restore({"streak": "x", "failures": [None]})
    assert broken.consecutive == 0 and broken.failures == []


def test_manifest_restart_block_is_closed() -> None:
    """The backoff always doubles (srt's); a multiplier is not a setting."""
    with pytest.raises(ValueError, match="multiplier"):
        RestartSpec.model_validate({"multiplier": 3})


def test_F05_crash_loop_makes_exactly_max_failures_starts() -> None:
    ops = FakeOps()
    ops.start_error = exec_error("start", "exits at once")

    async def main() -> None:
        clock = FakeClock()
        mgr = manager(
            ops,
            clock,
            lifecycle="always",
            restart={
                "backoff_initial_s": 1,
                "backoff_max_s": 4,
                "jitter": 0.25,
                "max_failures": 5,
                "window_s": 600,
            },
        )
        await mgr.start()
        sup = mgr.services["svc"]
        try:
            for _ in range(40):
                await clock.advance(1)
            assert sup.state == ServiceState.UNHEALTHY
            assert ops.count("start") == 5
            delays = [e.data["delay_s"] for e in mgr.events.of("restart_scheduled", "svc")]
            assert len(delays) == 4
            for n, delay in enumerate(delays, start=1):
                base = min(1 * 2 ** (n - 1), 4)
                assert base <= delay <= base * 1.25
            assert mgr.capabilities() == {"svc": False}
            await clock.advance(10_000)
            assert ops.count("start") == 5, "started again after giving up"
        finally:
            await mgr.shutdown()

    run(main())


def test_F06_stable_run_resets_the_backoff() -> None:
    ops = FakeOps()

    async def main() -> None:
        clock = FakeClock()
        mgr = manager(
            ops,
            clock,
            lifecycle="always",
            status_period_s=1,
            restart={"backoff_initial_s": 2, "backoff_max_s": 16, "jitter": 0, "max_failures": 50},
        )
        await mgr.start()
        sup = mgr.services["svc"]
        try:
            await clock.advance(0.1)
            assert sup.state == ServiceState.READY
            for _ in range(4):  # crash quickly four times: 2, 4, 8, 16
                ops.crash()
                for _ in range(40):
                    await clock.advance(1)
                    if sup.state == ServiceState.READY:
                        break
            delays = [e.data["delay_s"] for e in mgr.events.of("restart_scheduled", "svc")]
            assert delays == [2, 4, 8, 16]
            await clock.advance(33)  # stable for longer than reset_after = 2 x 16 s
            ops.crash()
            for _ in range(5):
                await clock.advance(1)
            delays = [e.data["delay_s"] for e in mgr.events.of("restart_scheduled", "svc")]
            assert delays[-1] == 2, "the stable run did not reset the backoff"
        finally:
            await mgr.shutdown()

    run(main())


@pytest.mark.parametrize("jump", [3600.0, -3600.0])
def test_F26_wall_clock_jump_does_not_move_timers(
    monkeypatch: pytest.MonkeyPatch, jump: float
) -> None:
    ops = FakeOps()
    ops.start_results = [exec_error("start", "first start fails")]
    real_time = time.time

    async def main() -> float:
        mgr = manager(
            ops,
            None,
            lifecycle="always",
            restart={"backoff_initial_s": 0.4, "backoff_max_s": 0.4, "jitter": 0},
        )
        await mgr.start()
        sup = mgr.services["svc"]
        try:
            while sup.state != ServiceState.BACKOFF:
                await asyncio.sleep(0.005)
            failed_at = time.monotonic()
            monkeypatch.setattr(time, "time", lambda: real_time() + jump)
            while not in_state(sup, ServiceState.READY):
                await asyncio.sleep(0.005)
            return time.monotonic() - failed_at
        finally:
            await mgr.shutdown()

    waited = run(main())
    assert 0.3 <= waited <= 2.0, f"restart after {waited:.2f} s instead of ~0.4 s"
