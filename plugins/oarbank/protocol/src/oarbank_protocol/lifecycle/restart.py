"""A service's restart budget: the manifest's ``restart`` block on the protocol's backoff.

The arithmetic (doubling with jitter up to a cap, failures counted in a sliding window,
giving up at ``max_failures``, a long run resetting the doubling) is
:mod:`~oarbank_protocol.lifecycle.backoff`. What this module adds is the protocol's view of
a failure: there is no exit code (a failed start, a service that stopped running, a status
that keeps failing are all failures), how long it ran is measured from the moment it became
ready, a failure the module calls not retryable ends the service at once (it is marked
unhealthy: retrying cannot help), and the counters are persisted in the agent's state file.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oarbank_protocol.lifecycle.backoff import BackoffPolicy, BackoffTracker
from oarbank_protocol.manifest import RestartSpec


@dataclass(frozen=True)
class FailureDecision:
    give_up: bool
    delay_s: float
    failures_in_window: int
    consecutive: int


@dataclass(frozen=True)
class RestartPlan:
    """What a failure leads to: the service is marked unhealthy (``give_up``), or it is
    started again after ``delay_s``; ``reason`` says which and why, for the state."""

    give_up: bool
    reason: str
    delay_s: float = 0.0


def policy_of(spec: RestartSpec) -> BackoffPolicy:
    """The manifest's restart block as a backoff policy (``reset_after`` defaulted)."""
    return BackoffPolicy(
        initial_s=spec.backoff_initial_s,
        max_s=spec.backoff_max_s,
        jitter=spec.jitter,
        max_failures=spec.max_failures,
        window_s=spec.window_s,
        reset_after_s=spec.reset_after,
    )


class RestartBudget:
    """One service's failures, on ``clock`` (the manager's monotonic clock)."""

    def __init__(
        self,
        spec: RestartSpec,
        clock: Callable[[], float],
        rng: random.Random | None = None,
    ) -> None:
        self.spec = spec
        self.clock = clock
        self.tracker = BackoffTracker(
            policy_of(spec), clock=clock, rand=(rng or random.Random()).random
        )
        self.running_since: float | None = None

    @property
    def failures(self) -> list[float]:
        return list(self.tracker.failures)

    @property
    def consecutive(self) -> int:
        return self.tracker.streak

    def on_running(self, now: float) -> None:
        self.running_since = now

    def on_stopped(self) -> None:
        """A deliberate stop is not a failure, and the stable-run clock stops."""
        self.running_since = None

    def failures_in_window(self) -> int:
        now = self.clock()
        return sum(1 for t in self.tracker.failures if now - t <= self.spec.window_s)

    def on_failure(self) -> FailureDecision:
        now = self.clock()
        ran_for = now - self.running_since if self.running_since is not None else 0.0
        self.running_since = None
        verdict = self.tracker.on_failure(ran_for)
        return FailureDecision(
            give_up=verdict.give_up,
            delay_s=verdict.delay_s,
            failures_in_window=verdict.failures_in_window,
            consecutive=self.tracker.streak,
        )

    def after_failure(self, reason: str, *, retryable: bool) -> RestartPlan:
        """Count a failure (``reason``) and plan what follows it.

        A non-retryable failure is counted too (the history shows it) but gives up at once.
        """
        decision = self.on_failure()
        if not retryable:
            return RestartPlan(True, f"{reason} (not retryable)")
        if decision.give_up:
            return RestartPlan(
                True,
                f"{decision.failures_in_window} failures within {self.spec.window_s:g} s "
                f"(max_failures {self.spec.max_failures}); last: {reason}",
            )
        return RestartPlan(
            False, f"{reason}; next start in {decision.delay_s:.2f} s", decision.delay_s
        )

    def reset(self) -> None:
        self.tracker.reset()
        self.running_since = None

    def to_record(self) -> dict[str, Any]:
        return {
            "streak": self.tracker.streak,
            "failures": list(self.tracker.failures),
            "running_since": self.running_since,
        }

    def restore(self, record: dict[str, Any]) -> None:
        """Best effort: anything malformed leaves the budget fresh rather than failing."""
        try:
            streak = int(record.get("streak", record.get("consecutive", 0)))
            failures = sorted(float(x) for x in record.get("failures", []))
            since = record.get("running_since")
            running_since = float(since) if since is not None else None
        except (TypeError, ValueError, AttributeError):
            return
        self.tracker.streak = max(streak, 0)
        self.tracker.failures.clear()
        self.tracker.failures.extend(failures)
        self.running_since = running_since
