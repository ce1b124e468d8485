"""What ``srt logs`` prints of the logs' past: each log's pieces with when they were
written (from the logs' size history, :mod:`srt_services.supervise.logclock`), and the
logs merged in that order, as ``docker compose logs`` and ``journalctl`` show them.

Logs of a job written by an older srt have no size history: they are printed one after
the other, as before, and without times.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator

from srt_services.logview.logfile import LogFile, Piece, read_times, stamp


def timed(f: LogFile, pieces: list[Piece]) -> list[float] | None:
    """When each of ``f``'s ``pieces`` was written, or ``None`` without a size history."""
    times = read_times(f.source.path)
    if times is None:
        return None
    try:
        last = os.stat(f.source.path).st_mtime
    except OSError:
        last = times[-1][1] if times else 0.0
    return stamp(pieces, times, last)


def merged(
    parts: list[tuple[str, list[Piece], list[float]]],
) -> Iterator[tuple[str, Piece, float]]:
    """Every piece of every log, by the time it was written (a log's own order kept; at
    the same time, the earlier log in plan order first)."""

    def one(
        index: int, name: str, pieces: list[Piece], times: list[float]
    ) -> Iterator[tuple[float, int, int, str, Piece]]:
        for seq, (piece, t) in enumerate(zip(pieces, times, strict=True)):
            yield t, index, seq, name, piece

    streams = [one(i, name, pieces, times) for i, (name, pieces, times) in enumerate(parts)]
    for t, _, _, name, piece in heapq.merge(*streams, key=lambda item: item[:3]):
        yield name, piece, t
