"""The lines ``srt logs`` writes: ``<instance> | <line>``, the instance names padded to one
width so the lines align, like ``docker compose logs``.

Bytes are written as they are in the file (a log need not be UTF-8). Marks (a new attempt)
read ``=== ... ===`` and notes about the file itself (truncated, rotated) ``--- ... ---``.
On a terminal the prefixes are coloured, one colour per instance, unless ``NO_COLOR`` is
set or ``--no-color`` given.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from typing import BinaryIO

from srt_services.logview.logfile import Piece

#: Output is written in batches of about this many bytes (the pieces come from a generator
#: reading a file of any size: never gathered whole).
BATCH = 1 << 16

#: ANSI foreground colours, in the order instances get them.
PALETTE = (36, 33, 32, 35, 34, 91, 92, 93, 94, 95, 96)


def use_color(stream: BinaryIO, wanted: bool | None) -> bool:
    if wanted is not None:
        return wanted
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def stamp_text(t: float) -> bytes:
    """``2024-05-01T12:00:03.120 `` (local time, milliseconds), as ``docker logs -t``."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))
    return f"{whole}.{int(t % 1 * 1000):03d} ".encode()


class Printer:
    def __init__(
        self,
        out: BinaryIO,
        names: Sequence[str],
        prefix: bool = True,
        color: bool = False,
        timestamps: bool = False,
    ) -> None:
        self.out = out
        #: print when each line was written (``--timestamps``)
        self.timestamps = timestamps
        width = max((len(n) for n in names), default=0)
        self._prefix: dict[str, bytes] = {}
        for i, name in enumerate(names):
            text = f"{name.ljust(width)} | " if prefix else ""
            if prefix and color:
                text = f"\x1b[{PALETTE[i % len(PALETTE)]}m{name.ljust(width)} |\x1b[0m "
            self._prefix[name] = text.encode()

    def write(
        self, name: str, pieces: Iterable[Piece], times: Iterable[float] | None = None
    ) -> None:
        """``pieces`` of ``name``'s log; ``times``: when each was written (``--timestamps``)."""
        if times is None:
            self.write_merged((name, piece, None) for piece in pieces)
        else:
            self.write_merged((name, p, t) for p, t in zip(pieces, times, strict=True))

    def write_merged(self, items: Iterable[tuple[str, Piece, float | None]]) -> None:
        """Pieces of any logs in the order given, each with when it was written (printed
        with ``--timestamps``), in batches: ``items`` may be a generator over a file of
        any size, never gathered whole."""
        lines: list[bytes] = []
        size = 0
        for name, piece, t in items:
            head = self._prefix.get(name, b"")
            if self.timestamps and t is not None:
                head += stamp_text(t)
            if piece.kind == "line":
                lines.append(head + piece.data + b"\n")
            elif piece.kind == "mark":
                lines.append(head + b"=== " + piece.data + b" ===\n")
            else:
                lines.append(head + b"--- " + piece.data + b" ---\n")
            size += len(lines[-1])
            if size >= BATCH:
                self.out.write(b"".join(lines))
                lines.clear()
                size = 0
        if lines:
            self.out.write(b"".join(lines))

    def flush(self) -> None:
        self.out.flush()
