"""One log file read incrementally: its past (all of it, the last ``n`` lines, or what was
written since a time), then whatever is appended to it.

Each attempt of the instance starts at the offset its ``launched`` event recorded; when the
instance has been started more than once, a mark line is put exactly there (an attempt
whose predecessor ended without a newline gets that last line flushed first). A file that
shrinks was truncated (``copytruncate``) and is read again from its start; a path that
now names another file was rotated: the old file is read to its end, then the new one
from its start. Both are said in a note line. Reading is by offsets (``pread``), so the
memory used is one chunk and one unfinished line, whatever the file's size.

Log files carry no time per line, so ``--since`` starts at the attempt that was running at
that time (its start is known); a line written after the time is never left out, and a
file not modified since then shows nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Literal

from srt_services.jobdir.attempts import Attempt
from srt_services.logview.sources import LogSource

CHUNK = 1 << 20
#: An unfinished line longer than this is shown in pieces (memory stays bounded).
MAX_LINE = 1 << 20
BACK_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Piece:
    kind: Literal["line", "mark", "note"]
    data: bytes
    #: a line: the file offset just past it (its newline); a mark: its attempt's start time
    end: int | None = None
    at: float | None = None


def read_times(path: str) -> list[tuple[int, float]] | None:
    """``path``'s size history (``<log>.times``, see
    :mod:`srt_services.supervise.logclock`) since its last drop (a truncation or a new
    file); ``None`` when there is none (a job of an older srt)."""
    try:
        with open(path + ".times", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    out: list[tuple[int, float]] = []
    for line in raw.split(b"\n"):
        try:
            size_text, t_text = line.split()
            size, t = int(size_text), float(t_text)
        except ValueError:
            continue
        if out and size < out[-1][0]:
            out = []
        out.append((size, t))
    return out


def stamp(pieces: list[Piece], times: list[tuple[int, float]], last: float) -> list[float]:
    """When each piece was written, at the latest: a line by the first recorded size that
    holds it (``last`` when none does yet: the file's modification time), a mark at its
    attempt's start; never earlier than the piece before it, so a file's order holds."""
    import bisect

    sizes = [s for s, _ in times]
    out: list[float] = []
    prev = 0.0
    for p in pieces:
        t: float | None = p.at
        if t is None and p.end is not None:
            i = bisect.bisect_left(sizes, p.end)
            t = times[i][1] if i < len(times) else last
        prev = max(prev, t if t is not None else prev)
        out.append(prev)
    return out


def tail_start(fd: int, start: int, end: int, lines: int) -> int:
    """Where the last ``lines`` lines of the file's ``[start, end)`` begin."""
    if lines <= 0:
        return end
    pos = end
    if end > start and os.pread(fd, 1, end - 1) == b"\n":
        pos -= 1  # the final newline ends the last line; it does not start another
    count = 0
    while pos > start:
        size = min(BACK_CHUNK, pos - start)
        block = os.pread(fd, size, pos - size)
        idx = len(block)
        while True:
            idx = block.rfind(b"\n", 0, idx)
            if idx < 0:
                break
            count += 1
            if count == lines:
                return pos - size + idx + 1
        pos -= size
    return start


def usable_marks(attempts: list[Attempt], size: int) -> list[Attempt]:
    """The attempts whose offsets point into the file as it is now: offsets start over
    after a truncation or a new file, so only those since the last drop count."""
    known = [(a.offset, a) for a in attempts if a.offset is not None]
    first = 0
    for i in range(1, len(known)):
        if known[i][0] < known[i - 1][0]:
            first = i
    return [a for offset, a in known[first:] if offset <= size]


def mark_text(attempt: Attempt) -> bytes:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(attempt.t))
    pid = f" (pid {attempt.pid})" if attempt.pid is not None else ""
    why = f": {attempt.why}" if attempt.why else ""
    return f"attempt {attempt.number}{pid} started {when}{why}".encode()


@dataclass
class LogFile:
    source: LogSource
    attempts: list[Attempt] = field(default_factory=list)
    pos: int = 0
    _fd: int | None = None
    _inode: int | None = None
    _partial: bytes = b""
    #: marks not printed yet, by offset, each with the file (inode) its offset is in
    _marks: list[tuple[Attempt, int | None]] = field(default_factory=list)

    @property
    def _marking(self) -> bool:
        return len(self.attempts) > 1

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open(self) -> os.stat_result | None:
        try:
            fd = os.open(self.source.path, os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, NotADirectoryError):
            return None
        self.close()
        self._fd = fd
        st = os.fstat(fd)
        self._inode = st.st_ino
        return st

    # ------------------------------------------------------------------ the past

    def read_past(self, lines: int | None = None, since: float | None = None) -> list[Piece]:
        """What the file holds now (the last ``lines`` lines, or since ``since``)."""
        st = self._open()
        if st is None:
            self._marks = [(a, None) for a in self.attempts] if self._marking else []
            return []
        assert self._fd is not None
        size = st.st_size
        marks = usable_marks(self.attempts, size)
        start = 0
        if since is not None:
            if st.st_mtime < since:
                start = size
            else:
                begun = [a.offset for a in marks if a.t <= since and a.offset is not None]
                start = max(begun, default=0)
        if lines is not None:
            start = max(start, tail_start(self._fd, start, size, lines))
        self.pos = start
        self._marks = [(a, st.st_ino) for a in marks if a.offset is not None and a.offset >= start]
        if not self._marking:
            self._marks = []
        pieces = self._read_to(size)
        if lines is None:
            return pieces
        return self._last_lines(pieces, lines)

    def _last_lines(self, pieces: list[Piece], lines: int) -> list[Piece]:
        """Only the last ``lines`` lines of ``pieces`` (and the unfinished one), and the marks
        among them: a mark splits a line the previous attempt left unfinished, so the tail
        counted in the file's newlines can hold a line more per mark than was asked for."""
        excess = sum(p.kind == "line" for p in pieces) + bool(self._partial) - lines
        if excess <= 0:
            return pieces
        for i, piece in enumerate(pieces):
            if piece.kind == "line":
                excess -= 1
                if excess == 0:
                    return pieces[i + 1 :]
        self._partial = b""  # asked for none
        return []

    # ------------------------------------------------------------------ what comes

    def add_attempt(self, attempt: Attempt) -> list[Piece]:
        """A new launch of the instance (from ``events.jsonl``): marked where it starts."""
        self.attempts.append(attempt)
        if not self._marking:
            return []
        # the launch opened (maybe created) the file its offset is in: the one there now
        try:
            inode: int | None = os.stat(self.source.path).st_ino
        except OSError:
            inode = None
        same_file = inode == self._inode
        if attempt.offset is None or (same_file and attempt.offset < self.pos):
            return [*self._take_partial(), Piece("mark", mark_text(attempt), at=attempt.t)]
        self._marks.append((attempt, inode))
        self._marks.sort(key=lambda m: m[0].offset or 0)
        return []

    def poll(self) -> list[Piece]:
        """What was appended since the last read (following truncation and rotation)."""
        out: list[Piece] = []
        if self._fd is None:
            if self._open() is None:
                return out
            self.pos = 0
        assert self._fd is not None
        try:
            path_inode: int | None = os.stat(self.source.path).st_ino
        except OSError:
            path_inode = None  # moved away: the old file may still be written to
        size = os.fstat(self._fd).st_size
        if size < self.pos:
            out += self._take_partial()
            out.append(Piece("note", b"log file truncated: following it from its start"))
            self.pos = 0
        out += self._read_to(size)
        if path_inode is not None and path_inode != self._inode:
            out += self._take_partial()
            st = self._open()
            self.pos = 0
            out.append(Piece("note", b"log file replaced (rotated): following the new file"))
            out += self._read_to(st.st_size if st is not None else 0)
        return out

    def flush_partial(self) -> list[Piece]:
        """The unfinished last line, shown as it is (the end of a read, or a quiet spell)."""
        return self._take_partial()

    # ------------------------------------------------------------------ reading

    def _take_partial(self) -> list[Piece]:
        if not self._partial:
            return []
        line, self._partial = self._partial, b""
        return [Piece("line", line, end=self.pos)]

    def _due(self, offset: int | None = None) -> list[tuple[Attempt, int | None]]:
        """Pending marks in the open file (at or before ``offset``), by offset."""
        return [
            m
            for m in self._marks
            if m[1] in (None, self._inode) and (offset is None or (m[0].offset or 0) <= offset)
        ]

    def _marks_at(self, offset: int, out: list[Piece]) -> None:
        for mark in self._due(offset):
            self._marks.remove(mark)
            out += self._take_partial()
            out.append(Piece("mark", mark_text(mark[0]), at=mark[0].t))

    def _read_to(self, end: int) -> list[Piece]:
        out: list[Piece] = []
        if self._fd is None:
            return out
        while self.pos < end:
            self._marks_at(self.pos, out)
            limit = end
            due = self._due()
            if due:
                limit = min(end, max(self.pos + 1, due[0][0].offset or 0))
            data = os.pread(self._fd, min(CHUNK, limit - self.pos), self.pos)
            if not data:
                break
            self.pos += len(data)
            self._feed(data, out)
        self._marks_at(self.pos, out)
        return out

    def _feed(self, data: bytes, out: list[Piece]) -> None:
        parts = (self._partial + data).split(b"\n")
        self._partial = parts.pop()
        end = self.pos - len(data) - (len(parts[0]) - data.find(b"\n")) if parts else 0
        for p in parts:  # each line's end: where its newline is in the file, plus one
            end += len(p) + 1
            out.append(Piece("line", p, end=end))
        while len(self._partial) > MAX_LINE:
            out.append(Piece("line", self._partial[:MAX_LINE]))
            self._partial = self._partial[MAX_LINE:]
