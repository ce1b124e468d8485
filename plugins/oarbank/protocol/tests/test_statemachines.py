"""Hypothesis state machines: the real implementation against small models.

* on_demand refcounting + idle timeout, through the real ModuleManager with a fake clock and
  in-memory ops;
* backoff and max_failures, on the restart budget (the protocol's backoff underneath).
"""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from oarbank_protocol.lifecycle.clock import FakeClock
from oarbank_protocol.lifecycle.manager import AdmissionRequest, ModuleManager
from oarbank_protocol.lifecycle.restart import RestartBudget
from oarbank_protocol.lifecycle.supervisor import ServiceState, SupervisorOptions
from oarbank_protocol.manifest import ModuleManifest, RestartSpec
from oarbank_testkit import NODE, FakeOps, service_entry

pytestmark = pytest.mark.timeout(120)

IDLE = 10.0
ATTEMPTS = st.sampled_from(["a0", "a1", "a2", "a3"])


class OnDemandRefcount(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        self.ops = FakeOps()
        manifest = ModuleManifest.model_validate(
            {
                "name": "m",
                "services": [
                    service_entry(
                        exec=["x"],
                        idle_timeout_s=IDLE,
                        status_period_s=1,
                        restart={
                            "backoff_initial_s": 0.1,
                            "backoff_max_s": 0.5,
                            "max_failures": 1000,
                        },
                    )
                ],
            }
        )
        self.manager = ModuleManager(
            manifest,
            node_id=NODE,
            ops_factory=lambda spec: self.ops,
            clock=self.clock,
            options=SupervisorOptions(refingerprint_initial_s=3600, reap_period_s=3600),
        )
        self.loop.run_until_complete(self.manager.start())
        self.sup = self.manager.services["svc"]
        # the model
        self.users: set[str] = set()
        self.running = False
        self.idle_since: float | None = None
        self.starts = 0

    def settle(self) -> None:
        self.loop.run_until_complete(self.clock.advance(0))

    @rule(attempt=ATTEMPTS)
    def admit(self, attempt: str) -> None:
        if attempt in self.users:
            return
        self.loop.run_until_complete(
            self.manager.admit(AdmissionRequest(attempt, needs=frozenset({"svc"})))
        )
        if not self.running:
            self.running = True
            self.starts += 1
        self.users.add(attempt)
        self.idle_since = None

    @rule(attempt=ATTEMPTS)
    def release(self, attempt: str) -> None:
        released = self.manager.release(attempt)
        assert released == (attempt in self.users)
        self.users.discard(attempt)
        if released and not self.users:
            self.idle_since = self.clock.monotonic()
        self.settle()

    @rule(dt=st.sampled_from([0.5, 3.0, 9.0, 11.0]))
    def advance(self, dt: float) -> None:
        self.loop.run_until_complete(self.clock.advance(dt))
        now = self.clock.monotonic()
        if (
            self.running
            and not self.users
            and self.idle_since is not None
            and now - self.idle_since >= IDLE
        ):
            self.running = False

    @precondition(lambda self: self.running)
    @rule()
    def crash_while_used(self) -> None:
        """A crash with users restarts it; without users it stays down."""
        self.ops.crash()
        self.loop.run_until_complete(self.clock.advance(1.0))  # status check notices
        self.loop.run_until_complete(self.clock.advance(2.0))  # backoff (<= 0.5 s) and restart
        if self.users:
            self.starts += 1
        else:
            self.running = False

    @invariant()
    def refcount_matches(self) -> None:
        assert set(self.sup.users) == self.users

    @invariant()
    def running_matches(self) -> None:
        expected = ServiceState.READY if self.running else ServiceState.STOPPED
        assert self.sup.state == expected, (self.sup.state, self.sup.reason)

    @invariant()
    def exactly_the_expected_starts(self) -> None:
        assert self.ops.count("start") == self.starts

    def teardown(self) -> None:
        try:
            self.loop.run_until_complete(self.manager.shutdown())
        finally:
            self.loop.close()


OnDemandRefcount.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestOnDemandRefcount = OnDemandRefcount.TestCase


POLICY = RestartSpec(
    backoff_initial_s=1,
    backoff_max_s=8,
    jitter=0.25,
    max_failures=4,
    window_s=30,
    reset_after_s=20,
)


class BackoffBudget(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.tracker = RestartBudget(POLICY, lambda: self.now, random.Random(3))
        self.failures: list[float] = []
        self.consecutive = 0
        self.running_since: float | None = None
        self.gave_up = False

    @precondition(lambda self: not self.gave_up)
    @rule(dt=st.floats(min_value=0.0, max_value=40.0))
    def fail(self, dt: float) -> None:
        self.now += dt
        if self.running_since is not None and self.now - self.running_since >= POLICY.reset_after:
            self.consecutive = 0
        self.running_since = None
        self.failures = [t for t in self.failures if t >= self.now - POLICY.window_s] + [self.now]
        self.consecutive += 1
        decision = self.tracker.on_failure()
        assert decision.failures_in_window == len(self.failures)
        assert decision.give_up == (len(self.failures) >= POLICY.max_failures)
        if decision.give_up:
            self.gave_up = True
            return
        base = min(POLICY.backoff_initial_s * 2 ** (self.consecutive - 1), POLICY.backoff_max_s)
        assert base - 1e-9 <= decision.delay_s <= base * 1.25 + 1e-9

    @precondition(lambda self: not self.gave_up)
    @rule(dt=st.floats(min_value=0.0, max_value=40.0))
    def run_for(self, dt: float) -> None:
        self.tracker.on_running(self.now)
        self.running_since = self.now
        self.now += dt

    @precondition(lambda self: self.gave_up)
    @rule()
    def operator_reset(self) -> None:
        self.tracker.reset()
        self.failures = []
        self.consecutive = 0
        self.running_since = None
        self.gave_up = False

    @invariant()
    def never_negative(self) -> None:
        assert self.tracker.consecutive >= 0
        assert len(self.tracker.failures) <= POLICY.max_failures


BackoffBudget.TestCase.settings = settings(
    max_examples=60, stateful_step_count=40, deadline=None, database=None
)
TestBackoffBudget = BackoffBudget.TestCase
