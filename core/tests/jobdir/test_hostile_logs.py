"""Issue 31, item 3: ``srt logs`` on logs that would cost it its memory or make it read
what it must not. A 1 GiB log and a 100 MB line without a newline are printed with the
memory of a small one (the command's own peak RSS, from ``wait4``, against the same command
on a small log; the bound is generous: holding either file would be far over it); a long
line is cut at the limit and says so, whatever marks fall inside it; a FIFO, a device or a
link out of the job directory in a log's place, or a log path in the job's files leading
out of it, is named and not read, with and without ``-f``; marks stay at their offsets
whatever the chunking of the writes and the reads (hypothesis).

ID (docs/fault-matrix.md): H33.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from srt_services.jobdir.attempts import Attempt
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.state import OrchestratorInfo, encode_state
from srt_services.logview.logfile import LogFile, Piece, cut_text, mark_text
from srt_services.logview.sources import LogSource

from .test_job_files import _state

MiB = 1 << 20
#: Over the small log's peak: far less than either big file, far more than the chunk and
#: the one unfinished line srt logs keeps (2 MiB with 1 MiB lines).
RSS_MARGIN = 48 * MiB


def shown(pieces: Iterable[Piece]) -> list[bytes]:
    return [p.data if p.kind == "line" else p.kind.encode() + b": " + p.data for p in pieces]


def attempt(n: int, offset: int | None) -> Attempt:
    return Attempt("s", n, offset, 0.0, 100 + n, "")


def logfile(path: Path, *attempts: Attempt, max_line: int = 8) -> LogFile:
    return LogFile(LogSource("s", str(path), "u", "s"), list(attempts), max_line=max_line)


# --------------------------------------------------------------------------- long lines


def test_H33_a_long_line_is_cut_and_says_so_the_next_one_is_whole(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    log.write_bytes(b"short\n" + b"x" * 30 + b"\nnext\n" + b"y" * 20)
    f = logfile(log)
    assert shown(f.read_past()) == [
        b"short",
        b"x" * 8 + cut_text(8),
        b"next",
        b"y" * 8 + cut_text(8),
    ]
    with log.open("ab") as fh:
        fh.write(b"yyyy still the cut line\nafter\n")
    assert shown(f.poll()) == [b"after"]  # the rest of the cut line is skipped, not shown
    assert f.flush_partial() == []


def test_H33_a_cut_never_splits_a_character(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    log.write_bytes(("abcdefgé" + "z" * 10 + "\n").encode())  # é is bytes 7-8
    [line] = shown(logfile(log).read_past())
    assert line == b"abcdefg" + cut_text(8)
    line.decode()


def test_H33_an_attempt_starting_inside_a_cut_line_starts_its_own(tmp_path: Path) -> None:
    log = tmp_path / "s.out"
    first = b"x" * 40  # the first attempt's last line: long, no newline
    log.write_bytes(first + b"second\n")
    f = logfile(log, attempt(1, 0), attempt(2, len(first)))
    assert shown(f.read_past()) == [
        b"mark: " + mark_text(attempt(1, 0)),
        b"x" * 8 + cut_text(8),
        b"mark: " + mark_text(attempt(2, 0)),
        b"second",
    ]


def expected(runs: list[list[bytes]], limit: int, known: int) -> list[bytes]:
    """What ``srt logs`` shows for these attempts' output (each a list of writes), the
    first ``known`` of them there when it started: the first attempt is marked only when
    a second was known by then (its lines were shown unmarked otherwise)."""
    out: list[bytes] = []
    for i, writes in enumerate(runs):
        if i > 0 or known > 1:
            out.append(b"mark: " + mark_text(attempt(i + 1, 0)))
        text = b"".join(writes)
        lines = text.split(b"\n")
        last = lines.pop()
        if last:
            lines.append(last)  # unfinished: shown before the next mark, or at the end
        for line in lines:
            out.append(line if len(line) <= limit else line[:limit] + cut_text(limit))
    return out


WRITES = st.lists(
    st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"")), max_size=5),
    min_size=1,
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(
    runs=WRITES,
    reads=st.lists(st.booleans(), max_size=40),
    limit=st.integers(1, 16),
    known=st.integers(0, 4),
)
def test_H33_marks_stay_where_each_attempt_began_however_it_is_read(
    tmp_path_factory: pytest.TempPathFactory,
    runs: list[list[bytes]],
    reads: list[bool],
    limit: int,
    known: int,
) -> None:
    """Attempts announced before their output is read (as ``-f`` reads events first),
    their writes polled at random moments: the output is each attempt's mark, then its
    lines, in order, long ones cut. Bytes are ASCII-free of UTF-8 continuation issues only
    by chance: the expected cut is plain, so continuation bytes are kept out."""
    runs = [[w.replace(b"\x80", b"a") for w in run] for run in runs]
    runs = [[bytes(b & 0x7F for b in w) for w in run] for run in runs]
    log = tmp_path_factory.mktemp("h28") / "s.out"
    known = min(known, len(runs))
    offset = 0
    before = []
    for i in range(known):
        before.append(attempt(i + 1, offset))
        offset += sum(len(w) for w in runs[i])
    log.write_bytes(b"".join(w for run in runs[:known] for w in run))
    f = logfile(log, *before, max_line=limit)
    got: list[Piece] = list(f.read_past())
    coin = iter(reads)
    for i, writes in enumerate(runs[known:], start=known):
        got += f.add_attempt(attempt(i + 1, offset))
        for w in writes:
            with log.open("ab") as fh:
                fh.write(w)
            offset += len(w)
            if next(coin, False):
                got += f.poll()
    got += f.poll()
    got += f.flush_partial()
    f.close()
    assert shown(got) == expected(runs, limit, known)


# --------------------------------------------------------------------------- what is read


def make_job(tmp_path: Path, log: str = "logs/service_etcd.out", **state: object) -> JobDir:
    job = JobDir(str(tmp_path / "job"))
    job.create()
    s = _state(**state)
    s.instances["service_etcd"].log = log
    Path(job.state_file).write_bytes(encode_state(s))
    Path(job.events_file).write_text('{"event": "job_started"}\n')
    return job


def srt_logs(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "srt_services", "logs", *args],
        capture_output=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "secret"
    path.write_text("root's secret\n")
    path.chmod(0o600)
    return path


@pytest.mark.parametrize("kind", ["fifo", "link-out", "link-loop", "directory", "planned-out"])
def test_H33_only_regular_files_in_the_job_directory_are_read(
    tmp_path: Path, secret: Path, kind: str
) -> None:
    job = make_job(tmp_path, log=str(secret) if kind == "planned-out" else "logs/service_etcd.out")
    log = Path(job.logs) / "service_etcd.out"
    if kind == "fifo":
        os.mkfifo(log)
    elif kind == "link-out":
        log.symlink_to(secret)
    elif kind == "link-loop":
        log.symlink_to(log.name)
    elif kind == "directory":
        log.mkdir()
    (Path(job.logs) / "sbatch.out").write_text("the other log\n")
    out = srt_logs(job.path, timeout=60)
    assert out.returncode == 1, out
    text = out.stdout.decode() + out.stderr.decode()
    assert "root's secret" not in text
    assert "Traceback" not in text
    said = {
        "fifo": "is a FIFO (named pipe), not a regular file",
        "link-out": "leads out of",
        "link-loop": "symbolic link loop",
        "directory": "is a directory, not a regular file",
        "planned-out": "leads out of",
    }[kind]
    assert "service_etcd | --- not read: " in out.stdout.decode(), text
    assert said in out.stdout.decode() and said in out.stderr.decode(), text
    # the others are still shown
    assert b"sbatch | the other log" in srt_logs(job.path, "sbatch").stdout


def test_H33_following_a_fifo_says_so_and_does_not_hang(tmp_path: Path) -> None:
    """The job runs (its recorded orchestrator is this test), so ``-f`` keeps following:
    the FIFO is named at once, a regular file put in its place later is read."""
    job = make_job(tmp_path, orchestrator=OrchestratorInfo.this_process(time.time()))
    log = Path(job.logs) / "service_etcd.out"
    os.mkfifo(log)
    proc = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "logs", "-f", job.path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert b"not read: " in first and b"is a FIFO" in first, first
        log.unlink()
        log.write_bytes(b"now a file\n")
        second = proc.stdout.readline()
        assert second == b"service_etcd | now a file\n", second
    finally:
        proc.terminate()
        proc.wait(30)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        assert b"Traceback" not in proc.stderr.read()
        proc.stderr.close()


# --------------------------------------------------------------------------- memory


def peak_rss(*args: str) -> tuple[int, int]:
    """(exit status, peak RSS in bytes) of ``srt logs ARGS`` writing to /dev/null."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(
            [sys.executable, "-m", "srt_services", "logs", *args],
            stdout=null,
            stderr=subprocess.PIPE,
        )
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    assert b"Traceback" not in err, err
    return proc.returncode, usage.ru_maxrss * 1024


def test_H33_a_1GiB_log_and_a_100MB_line_cost_what_a_small_log_does(tmp_path: Path) -> None:
    job = make_job(tmp_path)
    log = Path(job.logs) / "service_etcd.out"
    log.write_bytes(b"a small log\n" * 100)
    code, small = peak_rss(job.path)
    assert code == 0
    # 1 GiB: sparse (no disk), a newline every 64 KiB: 16,384 lines of NULs
    with log.open("wb") as fh:
        fh.truncate(1 << 30)
        for at in range(64 * 1024 - 1, 1 << 30, 64 * 1024):
            fh.seek(at)
            fh.write(b"\n")
    code, big = peak_rss(job.path)
    assert code == 0
    assert big < small + RSS_MARGIN, (small, big)
    # one line of 100 MB, no newline at all (cut at 1 MiB, the rest skipped)
    with log.open("wb") as fh:
        fh.truncate(100 * 1000 * 1000)
    code, line = peak_rss(job.path)
    assert code == 0
    assert line < small + RSS_MARGIN, (small, line)
    out = srt_logs(job.path)
    assert out.stdout.endswith(cut_text(1 << 20) + b"\n") and out.stdout.count(b"\n") == 1
