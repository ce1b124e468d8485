"""Tables that read well anywhere: aligned plain columns, one line per row, never wrapped.

A table cell that wraps mid-word (``critic…``, ``srt-e…`` or a path folded over five lines)
is unreadable and cannot be grepped. So a row is always one line. Without a terminal (a
pipe, a file, a test) every column is printed in full and aligned, for ``grep``, ``awk``
and ``column``. On a terminal narrower than the full table, the caller's *narrowing steps*
are applied in order until it fits: a column switches to its short form (a path relative to
the job directory, a plugin without its version) or is left out; only then is the text of
the columns that allow it cut with an ellipsis. The caller says what was left out, and
where the full text is (``--json``, a pipe, ``srt kinds NAME``).

Hand-written rather than a rich ``Table``: rich decides per cell whether to fold or cut
and pads every line to the console width, which is exactly what tools and tests trip on.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TextIO

#: Spaces between two columns.
GAP = 2
#: A cut column keeps at least this many characters (plus the ellipsis).
MIN_CUT = 6
ELLIPSIS = "…"


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its header, and how it may narrow on a small terminal."""

    header: str
    #: The cell's short form (``None``: the column has none).
    short: Callable[[str], str] | None = None
    #: The header used together with the short form.
    short_header: str | None = None
    #: How the text may be cut as a last resort: at the end (prose), in the middle (paths,
    #: whose both ends matter), or never.
    cut: Literal["end", "middle"] | None = None


@dataclass(frozen=True, slots=True)
class Step:
    """One narrowing step: ``short`` switches a column to its short form, ``drop`` leaves
    it out."""

    action: Literal["short", "drop"]
    header: str


@dataclass(slots=True)
class Fitted:
    """The table's lines and what was given up to fit them."""

    lines: list[str]
    dropped: list[str] = field(default_factory=list)
    shortened: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)

    @property
    def narrowed(self) -> bool:
        return bool(self.dropped or self.shortened or self.cut)

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width to fit, or ``None`` when ``stream`` is not a terminal (print everything).

    ``COLUMNS`` counts only on a terminal: a pipe gets full rows whatever the environment
    says, so what a script reads never depends on the window it was started from.
    """
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    return max(20, shutil.get_terminal_size().columns)


def one_line(text: object) -> str:
    """A cell's text on one line (a newline inside a cell would break every column)."""
    value = "-" if text is None or text == "" else str(text)
    return " ".join(value.split()) if any(c in value for c in "\n\r\t") else value


def fit(
    columns: Sequence[Column],
    rows: Sequence[Sequence[object]],
    width: int | None,
    steps: Sequence[Step] = (),
) -> Fitted:
    """Lay ``rows`` out under ``columns`` within ``width`` (``None``: no limit)."""
    headers = [c.header for c in columns]
    cells = [[one_line(v) for v in row] for row in rows]
    for row in cells:
        if len(row) != len(columns):
            raise ValueError(f"a row has {len(row)} cells for {len(columns)} columns")
    active = list(range(len(columns)))
    result = Fitted(lines=[])
    if width is not None:
        _narrow(columns, headers, cells, active, width, steps, result)
        _cut(columns, headers, cells, active, width, result)
    result.lines = _lines(headers, cells, active)
    return result


def _narrow(
    columns: Sequence[Column],
    headers: list[str],
    cells: list[list[str]],
    active: list[int],
    width: int,
    steps: Sequence[Step],
    result: Fitted,
) -> None:
    """Take ``steps`` in order (drop a column, or shorten its text) until the table fits."""
    by_header = {c.header: i for i, c in enumerate(columns)}
    for step in steps:
        if _total(headers, cells, active) <= width:
            return
        i = by_header[step.header]
        if i not in active:
            continue
        if step.action == "drop":
            active.remove(i)
            result.dropped.append(step.header)
        else:
            _shorten(columns[i], i, headers, cells)
            result.shortened.append(step.header)


def _shorten(column: Column, i: int, headers: list[str], cells: list[list[str]]) -> None:
    """Column ``i`` in its short form: its short header, and each cell's text shortened
    (a missing value stays ``-``)."""
    if column.short is None:
        raise ValueError(f"column {column.header} has no short form")
    if column.short_header:
        headers[i] = column.short_header
    for row in cells:
        if row[i] != "-":
            row[i] = one_line(column.short(row[i]))


def _widths(headers: list[str], cells: list[list[str]], active: list[int]) -> dict[int, int]:
    return {i: max([len(headers[i]), *(len(row[i]) for row in cells)]) for i in active}


def _total(headers: list[str], cells: list[list[str]], active: list[int]) -> int:
    """The widest line as printed: blanks that end a line are stripped there, so a last
    cell's trailing blanks must not count, or a table that fits would be narrowed."""
    return max(len(line) for line in _lines(headers, cells, active))


def _cut(
    columns: Sequence[Column],
    headers: list[str],
    cells: list[list[str]],
    active: list[int],
    width: int,
    result: Fitted,
) -> None:
    """Cut the text of the columns that allow it, widest first, until the table fits.

    A pass can fall short: the excess is measured on printed lines (a last cell's trailing
    blanks stripped), while a cut shortens the padded width, so cutting a cell that ends in
    blanks may free less than planned. Passes repeat until the table fits or nothing more
    can be cut."""
    while _cut_once(columns, headers, cells, active, width, result):
        pass


def _cut_once(
    columns: Sequence[Column],
    headers: list[str],
    cells: list[list[str]],
    active: list[int],
    width: int,
    result: Fitted,
) -> bool:
    """One pass of :func:`_cut`; ``True`` when it cut something and the table may still
    be too wide."""
    excess = _total(headers, cells, active) - width
    if excess <= 0:
        return False
    widths = _widths(headers, cells, active)
    limits: dict[int, int] = {}
    for i in sorted((i for i in active if columns[i].cut), key=lambda i: -widths[i]):
        floor = max(len(headers[i]), MIN_CUT + 1)
        give = min(excess, widths[i] - floor)
        if give <= 0:
            continue
        limits[i] = widths[i] - give
        excess -= give
        if excess <= 0:
            break
    for i, limit in limits.items():
        how = columns[i].cut
        assert how is not None
        for row in cells:
            row[i] = elide(row[i], limit, how)
        if columns[i].header not in result.cut:
            result.cut.append(columns[i].header)
    return bool(limits)


def elide(text: str, limit: int, how: Literal["end", "middle"] = "end") -> str:
    """``text`` in at most ``limit`` characters, an ellipsis marking what was cut."""
    if len(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    if how == "end":
        return text[: limit - 1] + ELLIPSIS
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return text[:head] + ELLIPSIS + text[len(text) - tail :]


def _lines(headers: list[str], cells: list[list[str]], active: list[int]) -> list[str]:
    widths = _widths(headers, cells, active)
    out = []
    for row in [headers, *cells]:
        parts = [row[i].ljust(widths[i]) for i in active]
        out.append((" " * GAP).join(parts).rstrip())
    return out


def narrowed_note(fitted: Fitted, full: str, width: int | None) -> list[str]:
    """What a narrow terminal cost and where the full text is, wrapped at words to fit."""
    if not fitted.narrowed:
        return []
    parts = []
    if fitted.dropped:
        parts.append(f"{', '.join(h.lower() for h in fitted.dropped)} not shown")
    if fitted.cut:
        parts.append(f"{', '.join(h.lower() for h in fitted.cut)} cut")
    if fitted.shortened and not parts:
        parts.append(f"{', '.join(h.lower() for h in fitted.shortened)} shortened")
    import textwrap

    text = f"(narrow terminal: {'; '.join(parts)}; {full})"
    return textwrap.wrap(text, width or len(text), break_long_words=False, break_on_hyphens=False)
