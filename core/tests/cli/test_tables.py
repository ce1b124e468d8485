"""The table layout behind ``srt status``, ``srt kinds`` and ``srt plugins list``."""

from __future__ import annotations

import io

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from srt_services.cli.tables import Column, Step, elide, fit, narrowed_note, terminal_width

COLUMNS = (
    Column("NAME", cut="end"),
    Column("STATE"),
    Column("PATH", short=lambda p: p.rsplit("/", 1)[-1], cut="middle"),
    Column("NOTE", cut="end"),
)
ROWS = [
    ("service_web", "ready", "/very/long/job/dir/logs/service_web.out", "tcp 127.0.0.1:9000"),
    ("b", "failed", "/very/long/job/dir/logs/b.out", None),
]
STEPS = (Step("short", "PATH"), Step("drop", "NOTE"))


def test_without_a_width_every_cell_is_in_full_and_aligned() -> None:
    fitted = fit(COLUMNS, ROWS, None, STEPS)
    assert fitted.lines == [
        "NAME         STATE   PATH                                     NOTE",
        "service_web  ready   /very/long/job/dir/logs/service_web.out  tcp 127.0.0.1:9000",
        "b            failed  /very/long/job/dir/logs/b.out            -",
    ]
    assert not fitted.narrowed
    assert narrowed_note(fitted, "see --json", None) == []


def test_narrowing_steps_apply_in_order_until_the_table_fits() -> None:
    fitted = fit(COLUMNS, ROWS, 60, STEPS)
    assert fitted.lines == [
        "NAME         STATE   PATH             NOTE",
        "service_web  ready   service_web.out  tcp 127.0.0.1:9000",
        "b            failed  b.out            -",
    ]
    assert (fitted.shortened, fitted.dropped, fitted.cut) == (["PATH"], [], [])
    fitted = fit(COLUMNS, ROWS, 40, STEPS)
    assert fitted.lines[1] == "service_web  ready   service_web.out"
    assert fitted.dropped == ["NOTE"]


def test_cutting_is_the_last_resort_and_marks_what_was_cut() -> None:
    fitted = fit(COLUMNS, ROWS, 30, STEPS)
    assert all(len(line) <= 30 for line in fitted.lines)
    assert fitted.lines[1] == "service_web  ready   serv….out"
    assert fitted.cut == ["PATH"]
    note = narrowed_note(fitted, "`x --json` has every field", 30)
    assert all(len(line) <= 30 for line in note)
    assert " ".join(note) == (
        "(narrow terminal: note not shown; path cut; `x --json` has every field)"
    )


def test_elide() -> None:
    assert elide("abcdefghij", 20) == "abcdefghij"
    assert elide("abcdefghij", 6) == "abcde…"
    assert elide("/a/b/c/d/e.out", 9, "middle") == "/a/b….out"


def test_a_pipe_has_no_width_and_a_tty_has_one(monkeypatch: pytest.MonkeyPatch) -> None:
    assert terminal_width(io.StringIO()) is None

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "91")
    assert terminal_width(Tty()) == 91


words = st.text(alphabet="abcdefghij/._- ", min_size=0, max_size=40)


@given(
    rows=st.lists(st.tuples(words, words, words, words), min_size=1, max_size=6),
    width=st.integers(min_value=40, max_value=200),
)
# a last cell ending in a blank: its padded width overstated what a cut frees
@example(rows=[("", "__", "", ""), ("______", "", "______", "_" * 21 + " ")], width=40)
def test_any_table_fits_a_terminal_of_forty_columns_or_more(
    rows: list[tuple[str, str, str, str]], width: int
) -> None:
    columns = (
        Column("A", cut="end"),
        Column("B", cut="end"),
        Column("C", short=lambda v: v[:8], cut="middle"),
        Column("D", cut="end"),
    )
    fitted = fit(columns, rows, width, (Step("short", "C"),))
    assert len(fitted.lines) == len(rows) + 1  # a row is one line, always
    assert all(len(line) <= width for line in fitted.lines)
    assert all(line == line.rstrip() for line in fitted.lines)
    full = fit(columns, rows, None)
    if all(len(line) <= width for line in full.lines):
        assert fitted.lines == full.lines  # nothing given up when it fits
