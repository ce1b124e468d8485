"""Restart decisions for non-critical services (pure: clock and randomness injected).

Delays double from ``backoff_initial`` up to ``backoff_max``, plus up to ``jitter`` of
random extra (so a crash loop of many services does not restart in lock step). Failures are
counted within a sliding window; ``max_failures`` of them and the service stays down
(``unhealthy``). A run longer than ``reset_after`` resets the doubling.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from srt_services.plan.model import PlannedRestart


class Action(Enum):
    """What to do about an exit."""

    #: start it again after ``delay``
    RESTART = "restart"
    #: leave it down: the policy does not restart this exit
    STAY_DOWN = "stay_down"
    #: leave it down for good: too many failures within the window (``unhealthy``)
    GIVE_UP = "give_up"


@dataclass(slots=True)
class Decision:
    action: Action
    delay: float = 0.0
    #: in words, for the event log (decisions never read it)
    reason: str = ""

    @property
    def restart(self) -> bool:
        return self.action is Action.RESTART


@dataclass(slots=True)
class RestartTracker:
    policy: PlannedRestart
    clock: Callable[[], float]
    rand: Callable[[], float] = field(default=random.random)
    failures: deque[float] = field(default_factory=deque)
    streak: int = 0

    def on_exit(self, code: int, ran_for: float) -> Decision:
        """What to do about an exit with ``code`` after running ``ran_for`` seconds."""
        p = self.policy
        if p.policy == "no":
            return Decision(Action.STAY_DOWN, reason="restart policy is no")
        if code == 0 and p.policy == "on-failure":
            return Decision(
                Action.STAY_DOWN, reason="exited 0 (policy on-failure restarts only failures)"
            )
        now = self.clock()
        if ran_for >= p.reset_after:
            self.streak = 0
        while self.failures and now - self.failures[0] > p.window:
            self.failures.popleft()
        self.failures.append(now)
        if len(self.failures) >= p.max_failures:
            return Decision(
                Action.GIVE_UP,
                reason=f"{len(self.failures)} failures within {p.window:g}s (max_failures"
                f" {p.max_failures}); giving up",
            )
        base = min(p.backoff_initial * (2**self.streak), p.backoff_max)
        self.streak += 1
        return Decision(Action.RESTART, delay=base * (1 + p.jitter * self.rand()))
