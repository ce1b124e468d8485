"""The readiness backoff schedule (pure).

Attempts double from 5 ms to 80 ms for the first ``FAST_WINDOW`` seconds, so a service
that comes up quickly is seen about 40 ms (median) after it opens its port. After that
the gap grows by a tenth of a second per second waited, up to the recipe's
``interval_seconds``: an engine that takes minutes to load is probed every few seconds at
most, and a hundred of them waiting cost almost nothing.

Why these numbers: on these machines every wake-up of an idle asyncio loop costs about
0.3 ms of CPU, so a waiting probe's cost is its number of attempts. A 100 ms cap with a
slower growth (0.05 s per second) left median detection at 50 ms plus jitter, against a
60 ms target; 80 ms with the faster growth makes the same number of attempts over a
10 s wait (58), moved to the first seconds, when most quick services come up.
"""

from __future__ import annotations

FAST_START = 0.005
FAST_CAP = 0.08
FAST_WINDOW = 3.0
SLOWDOWN = 0.1


def backoff_delay(attempt: int, elapsed: float, interval: float) -> float:
    if elapsed < FAST_WINDOW:
        return float(min(FAST_START * 2 ** min(attempt, 20), FAST_CAP, interval))
    return float(min(interval, FAST_CAP + SLOWDOWN * (elapsed - FAST_WINDOW)))
