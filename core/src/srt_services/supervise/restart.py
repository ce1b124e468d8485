"""Restart decisions for non-critical services (pure: clock and randomness injected).

Delays double from ``backoff_initial`` up to ``backoff_max``, plus up to ``jitter`` of
random extra (so a crash loop of many services does not restart in lock step). Failures are
counted within a sliding window; ``max_failures`` of them and the service stays down
(``unhealthy``). A run longer than ``reset_after`` resets the doubling.
"""

from __future__ import annotations

import random
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

from srt_services.contracts.plan import PlannedRestart

#: 2**64 times the smallest delay is past any maximum a recipe can write.
MAX_EXPONENT = 64


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
        # Capped before doubling, with a bounded exponent: a service that has crashed ten
        # thousand times must not turn 2**n into an OverflowError in the SIGCHLD path.
        base = min(p.backoff_initial * (2.0 ** min(self.streak, MAX_EXPONENT)), p.backoff_max)
        self.streak = min(self.streak + 1, MAX_EXPONENT)
        delay = min(base * (1 + p.jitter * self.rand()), sys.float_info.max)
        return Decision(Action.RESTART, delay=delay)
