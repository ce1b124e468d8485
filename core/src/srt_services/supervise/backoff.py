"""The readiness backoff schedule (pure)."""

from __future__ import annotations

FAST_START = 0.005
FAST_CAP = 0.1
FAST_WINDOW = 10.0


def backoff_delay(attempt: int, elapsed: float, interval: float) -> float:
    """Delay before the next attempt: doubling from 5 ms to 100 ms while the instance is
    young, then growing with its age up to ``interval`` (a slow starter is probed rarely)."""
    if elapsed < FAST_WINDOW:
        return min(FAST_START * 2 ** min(attempt, 20), FAST_CAP, interval)
    return min(interval, max(FAST_CAP, 0.1 * (elapsed - FAST_WINDOW)))
