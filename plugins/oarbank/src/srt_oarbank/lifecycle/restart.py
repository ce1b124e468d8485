"""Restart backoff and the ``max_failures`` budget, as a pure object (no I/O, no clock).

Kept free of asyncio so hypothesis can hammer it directly and the lifecycle manager only
asks "how long until the next start, or give up?".
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from srt_oarbank.protocol.manifest import RestartSpec


@dataclass(frozen=True)
class FailureDecision:
    give_up: bool
    delay_s: float
    failures_in_window: int
    consecutive: int


class RestartTracker:
    """Exponential backoff with jitter, failures counted in a sliding window.

    * delay = min(initial x multiplier^(n-1), max) x (1 ± jitter), n = consecutive failures;
    * a run that stayed up for ``reset_after`` (default 2 x max, as k8s) resets n, so the
      next delay is the initial one again;
    * the ``max_failures``-th failure inside ``window_s`` gives up instead of scheduling a
      start, so a crash loop makes exactly ``max_failures`` start attempts.
    """

    def __init__(self, policy: RestartSpec, rng: random.Random | None = None) -> None:
        self.policy = policy
        self.rng = rng or random.Random()
        self.consecutive = 0
        self.failures: deque[float] = deque()
        self.running_since: float | None = None

    def base_delay(self, consecutive: int) -> float:
        p = self.policy
        exponent = max(consecutive - 1, 0)
        # Cap the exponent so huge counts cannot overflow a float.
        raw = p.backoff_initial_s * (p.multiplier ** min(exponent, 64))
        return min(raw, p.backoff_max_s)

    def on_running(self, now: float) -> None:
        self.running_since = now

    def on_stopped(self) -> None:
        """A deliberate stop is not a failure, and the stable-run clock stops."""
        self.running_since = None

    def prune(self, now: float) -> None:
        horizon = now - self.policy.window_s
        while self.failures and self.failures[0] < horizon:
            self.failures.popleft()

    def on_failure(self, now: float) -> FailureDecision:
        if self.running_since is not None and now - self.running_since >= self.policy.reset_after:
            self.consecutive = 0
        self.running_since = None
        self.failures.append(now)
        self.prune(now)
        self.consecutive += 1
        count = len(self.failures)
        if count >= self.policy.max_failures:
            return FailureDecision(True, 0.0, count, self.consecutive)
        base = self.base_delay(self.consecutive)
        jitter = self.policy.jitter
        delay = base * (1.0 + jitter * self.rng.uniform(-1.0, 1.0)) if jitter else base
        return FailureDecision(False, max(delay, 0.0), count, self.consecutive)

    def reset(self) -> None:
        self.consecutive = 0
        self.failures.clear()
        self.running_since = None

    def to_record(self) -> dict[str, Any]:
        return {
            "consecutive": self.consecutive,
            "failures": list(self.failures),
            "running_since": self.running_since,
        }

    def restore(self, record: dict[str, Any]) -> None:
        """Best effort: anything malformed leaves the tracker fresh rather than failing."""
        try:
            consecutive = int(record.get("consecutive", 0))
            failures = [float(x) for x in record.get("failures", [])]
            since = record.get("running_since")
            running_since = float(since) if since is not None else None
        except (TypeError, ValueError, AttributeError):
            return
        self.consecutive = max(consecutive, 0)
        self.failures = deque(sorted(failures))
        self.running_since = running_since
