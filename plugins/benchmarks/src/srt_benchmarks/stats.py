"""Summaries of latency samples: mean and the percentiles srtctl's reports carry."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

PERCENTILES = (50, 90, 99)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile with linear interpolation between closest ranks (numpy's
    default), so the numbers compare with vLLM's and SGLang's benchmark scripts."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summary(values: Sequence[float], scale: float = 1000.0) -> dict[str, float | None]:
    """``mean``, ``p50``, ``p90``, ``p99`` (and ``min``/``max``), in ms by default; ``None``
    where there is no sample (JSON has no NaN)."""
    if not values:
        return dict.fromkeys(("mean", "min", "max", *(f"p{q}" for q in PERCENTILES)))
    out: dict[str, float | None] = {
        "mean": statistics.fmean(values) * scale,
        "min": min(values) * scale,
        "max": max(values) * scale,
    }
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(values, q) * scale
    return out
