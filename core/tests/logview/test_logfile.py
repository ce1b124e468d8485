"""One log file read back: the last N lines, attempt marks at their offsets (an unfinished
line before a mark is flushed), --since by attempt, and following appends, truncation and
rotation. Real files, no processes."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srt_services.jobdir.attempts import Attempt, attempts_by_step
from srt_services.logview.logfile import LogFile, Piece, tail_start, usable_marks
from srt_services.logview.sources import LogSource


def shown(pieces: Iterable[Piece]) -> list[str]:
    out = []
    for p in pieces:
        text = p.data.decode()
        out.append(text if p.kind == "line" else f"[{p.kind}] {text}")
    return out


def attempt(n: int, offset: int | None, t: float = 0.0, why: str = "") -> Attempt:
    return Attempt("s", n, offset, t, 100 + n, why)


def logfile(path: Path, *attempts: Attempt) -> LogFile:
    return LogFile(LogSource("s", str(path), "u", "s"), list(attempts))


@given(st.lists(st.text(alphabet="ab\n", max_size=30), max_size=5), st.integers(0, 8))
def test_tail_start_is_the_start_of_the_last_n_lines(chunks: list[str], n: int) -> None:
    import tempfile

    data = "".join(chunks).encode()
    with tempfile.TemporaryFile() as fh:
        fh.write(data)
        fh.flush()
        start = tail_start(fh.fileno(), 0, len(data), n)
    expected = b"".join(data.splitlines(keepends=True)[-n:]) if n else b""
    assert data[start:] == expected


def test_marks_go_where_each_attempt_began(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    first = b"one\ntwo\nno newline"
    second = b"three\n"
    log.write_bytes(first + second)
    f = logfile(log, attempt(1, 0), attempt(2, len(first), why="restarted after exit 3"))
    assert shown(f.read_past())[:4] == [
        "[mark] attempt 1 (pid 101) started " + _when(0),
        "one",
        "two",
        "no newline",
    ]
    assert shown(f.read_past())[4:] == [
        "[mark] attempt 2 (pid 102) started " + _when(0) + ": restarted after exit 3",
        "three",
    ]


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def test_one_attempt_is_not_marked_and_the_tail_keeps_later_marks(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    log.write_bytes(b"a\nb\nc\n")
    assert shown(logfile(log, attempt(1, 0)).read_past()) == ["a", "b", "c"]
    log.write_bytes(b"a\nb\nc\nd\n")
    f = logfile(log, attempt(1, 0), attempt(2, 4))
    assert shown(f.read_past(lines=2)) == [
        "[mark] attempt 2 (pid 102) started " + _when(0),
        "c",
        "d",
    ]
    assert shown(logfile(log).read_past(lines=0)) == []


def test_since_starts_at_the_attempt_running_then(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    log.write_bytes(b"old\nnew\n")
    f = logfile(log, attempt(1, 0, t=100.0), attempt(2, 4, t=200.0))
    assert shown(f.read_past(since=250.0))[1:] == ["new"]  # attempt 2 ran at 250
    f = logfile(log, attempt(1, 0, t=100.0), attempt(2, 4, t=200.0))
    assert shown(f.read_past(since=150.0))[1::2] == ["old", "new"]  # attempt 1 ran at 150
    assert shown(logfile(log, attempt(1, 0, t=100.0)).read_past(since=50.0)) == ["old", "new"]
    stale = time.time() - 3600
    os.utime(log, (stale, stale))
    assert shown(logfile(log, attempt(1, 0)).read_past(since=stale + 60)) == []


def test_offsets_from_before_a_truncation_are_not_used() -> None:
    marks = usable_marks([attempt(1, 0), attempt(2, 500), attempt(3, 0), attempt(4, 20)], 30)
    assert [a.number for a in marks] == [3, 4]
    assert [a.number for a in usable_marks([attempt(1, None), attempt(2, 40)], 30)] == []


def test_following_appends_a_new_attempt_truncation_and_rotation(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    log.write_bytes(b"one\n")
    f = logfile(log, attempt(1, 0))
    assert shown(f.read_past()) == ["one"]
    with log.open("ab") as fh:
        fh.write(b"two\nhalf")
    assert shown(f.poll()) == ["two"]
    assert shown(f.add_attempt(attempt(2, 12))) == []  # marked when reading gets there
    with log.open("ab") as fh:
        fh.write(b"second run\n")
    assert shown(f.poll()) == [
        "half",
        "[mark] attempt 2 (pid 102) started " + _when(0),
        "second run",
    ]

    log.write_bytes(b"x\n")  # truncated in place (copytruncate), then written
    assert shown(f.poll()) == ["[note] log file truncated: following it from its start", "x"]

    os.rename(log, tmp_path / "s.out.1")
    with (tmp_path / "s.out.1").open("ab") as fh:
        fh.write(b"last of the old file\n")
    log.write_bytes(b"fresh\n")
    assert shown(f.poll()) == [
        "last of the old file",
        "[note] log file replaced (rotated): following the new file",
        "fresh",
    ]
    f.close()


def test_a_log_that_does_not_exist_yet_is_read_once_it_does(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    f = logfile(log)
    assert list(f.read_past()) == [] and list(f.poll()) == []
    log.write_bytes(b"hello")
    assert list(f.poll()) == []
    assert shown(f.flush_partial()) == ["hello"]
    f.close()


def test_attempts_from_events_say_why_they_started() -> None:
    events = [
        {"event": "job_started"},
        {"event": "launched", "step": "s", "attempt": 1, "offset": 0, "t": 1.0, "pid": 5},
        {"event": "exited", "step": "s", "code": 3},
        {"event": "restarting", "step": "s"},
        {"event": "launched", "step": "s", "attempt": 2, "offset": 9, "t": 2.0, "pid": 6},
        {"event": "control_request", "op": "restart", "steps": ["s"], "by": "uid 0 (pid 9)"},
        {"event": "exited", "step": "s", "code": 143},
        {"event": "launched", "step": "s", "attempt": 3, "offset": 20, "t": 3.0, "pid": 7},
        {"event": "exited", "step": "s", "code": 137},
        {"event": "job_started"},
        {"event": "launched", "step": "s", "attempt": 1, "offset": 30, "t": 4.0, "pid": 8},
        {"event": "launched", "step": "t", "attempt": 1, "t": 4.0},
    ]
    found = attempts_by_step(events)
    assert [(a.number, a.offset, a.why) for a in found["s"]] == [
        (1, 0, ""),
        (2, 9, "restarted after exit 3"),
        (3, 20, "restarted by srt restart from uid 0 (pid 9)"),
        (1, 30, "a new srt run in this job directory"),
    ]
    assert found["t"][0].offset is None


@pytest.mark.parametrize(
    ("text", "ago"), [("30s", 30), ("10m", 600), ("2h", 7200), ("1d", 86400), ("1.5m", 90)]
)
def test_since_durations(text: str, ago: float) -> None:
    from srt_services.cli.log_cmds import parse_since

    assert parse_since(text, now=10_000_000.0) == 10_000_000.0 - ago


def test_since_clock_times_and_nonsense() -> None:
    import click
    from srt_services.cli.log_cmds import parse_since

    assert parse_since("2024-05-01 12:30") == time.mktime((2024, 5, 1, 12, 30, 0, 0, 0, -1))
    now = time.mktime((2024, 5, 1, 18, 0, 0, 0, 0, -1))
    assert parse_since("12:30", now=now) == time.mktime((2024, 5, 1, 12, 30, 0, 0, 0, -1))
    with pytest.raises(click.BadParameter, match="is not a time"):
        parse_since("yesterday")


def test_the_tail_counts_lines_not_newlines_when_attempts_split_them(tmp_path: Path) -> None:
    """`srt logs -n 1` of a service restarted after leaving a line unfinished: the last
    line and its attempt's mark, not the previous attempt's unfinished line and mark too."""
    log = tmp_path / "s.out"
    chunk = b"start\nunfinished"
    log.write_bytes(chunk * 3 + b"start\n")
    attempts = [attempt(n + 1, n * len(chunk)) for n in range(4)]
    assert shown(logfile(log, *attempts).read_past(lines=1)) == [
        "[mark] attempt 4 (pid 104) started " + _when(0),
        "start",
    ]
    two = shown(logfile(log, *attempts).read_past(lines=2))
    assert two == ["unfinished", "[mark] attempt 4 (pid 104) started " + _when(0), "start"]
    log.write_bytes(chunk * 3)  # the last attempt's line is unfinished too
    f = logfile(log, *attempts[:3])
    assert shown(f.read_past(lines=1)) == []
    assert shown(f.flush_partial()) == ["unfinished"]
    f = logfile(log, *attempts[:3])
    assert shown(f.read_past(lines=0)) + shown(f.flush_partial()) == []


def test_each_line_gets_the_first_recorded_size_that_holds_it(tmp_path: Path) -> None:
    from srt_services.logview.logfile import read_times, stamp
    from srt_services.logview.past import merged

    a, b = tmp_path / "a.out", tmp_path / "b.out"
    a.write_bytes(b"a1\na2\npart")
    b.write_bytes(b"b1\n")
    # a grew to 3 bytes at 10.0 and to 11 at 12.0; a drop (truncation) starts over
    (tmp_path / "a.out.times").write_text("50 1.0\n3 10.0\n11 12.0\n")
    (tmp_path / "b.out.times").write_text("3 11.0\nnot a line\n")
    assert read_times(str(a)) == [(3, 10.0), (11, 12.0)]
    assert read_times(str(tmp_path / "none.out")) is None
    fa, fb = logfile(a), logfile(b)
    pa = [*fa.read_past(), *fa.flush_partial()]
    pb = list(fb.read_past())
    assert [p.end for p in pa] == [3, 6, 10]
    ta = stamp(pa, read_times(str(a)) or [], 99.0)
    assert ta == [10.0, 12.0, 12.0]
    tb = stamp(pb, read_times(str(b)) or [], 99.0)
    out = [(n, p.data.decode(), t) for n, p, t in merged([("a", pa, ta), ("b", pb, tb)])]
    assert out == [("a", "a1", 10.0), ("b", "b1", 11.0), ("a", "a2", 12.0), ("a", "part", 12.0)]
    # not recorded yet: the file's modification time; a mark: its attempt's start
    late = stamp([Piece("line", b"x", end=99), Piece("mark", b"m", at=5.0)], [(3, 10.0)], 20.0)
    assert late == [20.0, 20.0]  # never earlier than the line before it
