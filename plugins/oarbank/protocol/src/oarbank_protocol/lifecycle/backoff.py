"""The protocol's restart backoff, as pure arithmetic.

Service protocol 1 says: "failures back off exponentially (``restart.backoff_initial_s`` up
to ``backoff_max_s``). After ``max_failures``, the service is marked unhealthy." The spec
leaves the details open; this module fixes them, once, for every agent built on this
library:

* the n-th consecutive failure waits ``backoff_initial_s * 2**(n-1)``, capped at
  ``backoff_max_s``, plus a random extra of up to ``jitter`` times that (never less than the
  base delay), so services that crash together do not restart in lock step;
* failures are counted within a sliding window of ``window_s``; the ``max_failures``-th one
  within it gives up instead of scheduling a start, so a crash loop makes exactly
  ``max_failures`` starts before the service is marked unhealthy;
* a run that lasted at least ``reset_after`` seconds before it failed resets the doubling
  (a service that crashes once a day starts again after ``backoff_initial_s``).

These are the semantics srt applies to its own ``restart:`` blocks, so a protocol service
run by srt backs off like any other srt service; the srt adapter's tests hold the two to the
same decisions. Nothing here does I/O: the clock and the random source are injected and the
state (``failures``, ``streak``) is plain data that a caller may persist and restore.
"""

from __future__ import annotations

import random
import sys
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

#: Beyond 2**64 times the smallest delay every delay is the cap; bounding the exponent keeps
#: a service that failed ten thousand times from overflowing the arithmetic.
MAX_DOUBLINGS = 64


@dataclass(frozen=True)
class BackoffPolicy:
    """The numbers of a manifest's ``restart`` block (``reset_after`` already defaulted)."""

    initial_s: float
    max_s: float
    jitter: float
    max_failures: int
    window_s: float
    reset_after_s: float


@dataclass(frozen=True)
class Verdict:
    """What to do about one failure: give up, or start again after ``delay_s``."""

    give_up: bool
    delay_s: float
    failures_in_window: int


@dataclass
class BackoffTracker:
    """One service's failure history under a :class:`BackoffPolicy`."""

    policy: BackoffPolicy
    clock: Callable[[], float]
    rand: Callable[[], float] = field(default=random.random)
    #: When each failure within the window happened (``clock`` readings, oldest first).
    failures: deque[float] = field(default_factory=deque)
    #: Consecutive failures since the last reset: the exponent of the next delay.
    streak: int = 0

    def on_failure(self, ran_for_s: float) -> Verdict:
        """Record a failure of a run that lasted ``ran_for_s`` seconds and decide."""
        p = self.policy
        now = self.clock()
        if ran_for_s >= p.reset_after_s:
            self.streak = 0
        while self.failures and now - self.failures[0] > p.window_s:
            self.failures.popleft()
        self.failures.append(now)
        if len(self.failures) >= p.max_failures:
            return Verdict(True, 0.0, len(self.failures))
        base = min(p.initial_s * 2.0 ** min(self.streak, MAX_DOUBLINGS), p.max_s)
        self.streak = min(self.streak + 1, MAX_DOUBLINGS)
        delay = min(base * (1.0 + p.jitter * self.rand()), sys.float_info.max)
        return Verdict(False, delay, len(self.failures))

    def reset(self) -> None:
        """Forget every failure (an operator's reset, or a fingerprint healthy again)."""
        self.failures.clear()
        self.streak = 0
