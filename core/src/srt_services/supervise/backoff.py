"""The readiness backoff schedule (pure).

Attempts double from 5 ms to 100 ms, so a service that comes up in its first seconds is
seen within ~50 ms of opening its port. After ``FAST_WINDOW`` the gap grows with the
instance's age (a tenth of a second more per two seconds waited) up to the recipe's
``interval_seconds``: an engine that takes minutes to load is probed a few times a minute
at most, and a hundred of them waiting cost almost nothing.
"""

from __future__ import annotations

FAST_START = 0.005
FAST_CAP = 0.1
FAST_WINDOW = 3.0
SLOWDOWN = 0.05


def backoff_delay(attempt: int, elapsed: float, interval: float) -> float:
    if elapsed < FAST_WINDOW:
        return float(min(FAST_START * 2 ** min(attempt, 20), FAST_CAP, interval))
    return float(min(interval, FAST_CAP + SLOWDOWN * (elapsed - FAST_WINDOW)))
