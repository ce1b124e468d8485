"""What ``srt logs`` prints of the logs' past: each log's pieces with when they were
written (from the logs' size history, :mod:`srt_services.supervise.logclock`), and the
logs merged in that order, as ``docker compose logs`` and ``journalctl`` show them.

Logs of a job written by an older srt have no size history: they are printed one after
the other, as before, and without times.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator

from srt_services.logview.logfile import LogFile, Piece, read_times, stamped


def timed(f: LogFile, pieces: Iterable[Piece]) -> Iterator[tuple[Piece, float]] | None:
    """``f``'s ``pieces``, each with when it was written, or ``None`` without a size
    history (a job of an older srt). Lazy: the pieces are read as they are consumed."""
    times = read_times(f.source.path)
    if times is None:
        return None
    try:
        last = os.stat(f.source.path).st_mtime
    except OSError:
        last = times[-1][1] if times else 0.0
    return stamped(pieces, times, last)


def merged(
    parts: Iterable[tuple[str, Iterable[Piece], Iterable[float]]],
) -> Iterator[tuple[str, Piece, float]]:
    """Every piece of every log, by the time it was written (a log's own order kept; at
    the same time, the earlier log in plan order first)."""
    return merged_timed((name, zip(p, t, strict=True)) for name, p, t in parts)


def merged_timed(
    parts: Iterable[tuple[str, Iterator[tuple[Piece, float]]]],
) -> Iterator[tuple[str, Piece, float]]:
    """:func:`merged` over :func:`timed`'s streams (pieces paired with their times).
    Streams: one piece per log is held at a time, whatever the logs' sizes."""

    def one(
        index: int, name: str, items: Iterator[tuple[Piece, float]]
    ) -> Iterator[tuple[float, int, int, str, Piece]]:
        for seq, (piece, t) in enumerate(items):
            yield t, index, seq, name, piece

    streams = [one(i, name, items) for i, (name, items) in enumerate(parts)]
    for t, _, _, name, piece in heapq.merge(*streams, key=lambda item: item[:3]):
        yield name, piece, t
