"""Failure and success thresholds so a flapping check does not churn (k8s probe semantics)."""

from __future__ import annotations


class HealthFilter:
    """Turns a stream of ok/not-ok observations into a stable available/unavailable state.

    The state starts unknown (treated as unavailable). Leaving "available" needs
    ``failure_threshold`` consecutive failures; reaching it needs ``success_threshold``
    consecutive successes. The first failure from the unknown state settles it as
    unavailable at once, so a broken probe is reported promptly.
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
        return self.state is True

    def observe(self, ok: bool) -> bool:
        """Record one observation; return True when the state changed."""
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
