"""Failure and success thresholds for probes: what they may delay, and what they may not.

The protocol says a capability is available *while its probe reports healthy*, so the
first unhealthy observation withdraws it: an admission a moment later must be refused,
whatever the thresholds. What the thresholds still smooth is the *announcement* (the
``capability_withdrawn`` event and its log line), so a probe that flaps every period does
not fill the log: k8s semantics for the reported state, none for availability. A probe
has no process to restart, so nothing else is there to delay.
"""

from __future__ import annotations


class HealthFilter:
    """Turns a stream of ok/not-ok observations into availability and a reported state.

    ``available`` needs the last ``success_threshold`` observations healthy and is lost at
    the first failure. ``state`` (the announced state) starts unknown; leaving "available"
    needs ``failure_threshold`` consecutive failures, and the first failure from unknown
    settles it at once, so a broken probe is reported promptly.
    """

    def __init__(self, failure_threshold: int = 3, success_threshold: int = 1) -> None:
        if failure_threshold < 1 or success_threshold < 1:
            raise ValueError("thresholds must be >= 1")
        self.failure_threshold = failure_threshold
        self.success_threshold = success_threshold
        self.state: bool | None = None
        self.successes = 0
        self.failures = 0

    @property
    def available(self) -> bool:
        return self.failures == 0 and self.successes >= self.success_threshold

    def observe(self, ok: bool) -> bool:
        """Record one observation; return True when the announced state changed."""
        if ok:
            self.successes += 1
            self.failures = 0
            if self.state is not True and self.successes >= self.success_threshold:
                self.state = True
                return True
            return False
        self.failures += 1
        self.successes = 0
        if self.state is None or (self.state and self.failures >= self.failure_threshold):
            self.state = False
            return True
        return False
