"""One log file read incrementally: its past (all of it, the last ``n`` lines, or what was
written since a time), then whatever is appended to it.

Each attempt of the instance starts at the offset its ``launched`` event recorded; when the
instance has been started more than once, a mark line is put exactly there (an attempt
whose predecessor ended without a newline gets that last line flushed first). A file that
shrinks was truncated (``copytruncate``) and is read again from its start; a path that
now names another file was rotated: the old file is read to its end, then the new one
from its start. Both are said in a note line.

Memory stays bounded whatever the file holds (a 1 GiB log, a 100 MB line without a
newline): reading is by offsets (``pread``) a chunk at a time, and the pieces are handed
out as they are made (every reading method is a generator), never gathered for the whole
file. A line longer than ``max_line`` bytes is cut there, the cut said on the line itself
(``... [line cut at 1048576 bytes]``) and the rest of it skipped up to its newline, or up
to where the next attempt begins (that attempt's output starts a line of its own).

A log is opened only as a regular file inside the job directory
(:func:`srt_services.safefile.open_beneath`): a FIFO, a device or a link out of the job
directory in its place (or a log path in ``plan.json`` that leads out of it) is not read;
a note says why, once, and the file is tried again when following.

Log files carry no time per line, so ``--since`` starts at the attempt that was running at
that time (its start is known); a line written after the time is never left out, and a
file not modified since then shows nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Literal

from srt_services import safefile
from srt_services.jobdir.attempts import Attempt
from srt_services.logview.sources import LogSource

CHUNK = 1 << 20
#: A line longer than this is cut (memory stays bounded); the cut is said on the line.
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


def stamped(
    pieces: Iterable[Piece], times: list[tuple[int, float]], last: float
) -> Iterator[tuple[Piece, float]]:
    """Each piece with when it was written, at the latest: a line by the first recorded
    size that holds it (``last`` when none does yet: the file's modification time), a mark
    at its attempt's start; never earlier than the piece before it, so a file's order
    holds. A generator: the pieces of a file of any size go through one at a time."""
    import bisect

    sizes = [s for s, _ in times]
    prev = 0.0
    for p in pieces:
        t: float | None = p.at
        if t is None and p.end is not None:
            i = bisect.bisect_left(sizes, p.end)
            t = times[i][1] if i < len(times) else last
        prev = max(prev, t if t is not None else prev)
        yield p, prev


def stamp(pieces: Iterable[Piece], times: list[tuple[int, float]], last: float) -> list[float]:
    """:func:`stamped`'s times alone, as a list."""
    return [t for _, t in stamped(pieces, times, last)]


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


def cut_text(limit: int) -> bytes:
    """What ends a line cut at ``limit`` bytes."""
    return f" [line cut at {limit} bytes]".encode()


def _char_start(data: bytes, at: int) -> int:
    """``at``, moved back to the start of the UTF-8 character it falls inside (a cut line
    never ends in half a character; at most 3 bytes back, whatever the bytes are)."""
    i = at
    while i > 0 and at - i < 3 and i < len(data) and (data[i] & 0xC0) == 0x80:
        i -= 1
    return i if i > 0 and (data[i] & 0xC0) != 0x80 else at


def open_log(source: LogSource) -> int:
    """A read-only descriptor of ``source``'s file: a regular file inside the job directory
    (or, without one, inside its own directory), never a FIFO, a device or a link out."""
    if source.root is not None:
        return safefile.open_beneath(source.root, os.path.relpath(source.path, source.root))
    directory, name = os.path.split(source.path)
    return safefile.open_beneath(directory or ".", name)


@dataclass
class LogFile:
    source: LogSource
    attempts: list[Attempt] = field(default_factory=list)
    pos: int = 0
    #: lines longer than this are cut
    max_line: int = MAX_LINE
    _fd: int | None = None
    _inode: int | None = None
    _partial: bytes = b""
    #: the line being read was cut: what is left of it is skipped up to its newline
    _cutting: bool = False
    #: why the file could not be opened just now, and the last reason said in a note
    _refusal: str | None = None
    _said: str | None = None
    #: marks not printed yet, by offset, each with the file (inode) its offset is in
    _marks: list[tuple[Attempt, int | None]] = field(default_factory=list)

    @property
    def _marking(self) -> bool:
        return len(self.attempts) > 1

    @property
    def refused(self) -> str | None:
        """Why the file was not read (the last reason said), if it was not."""
        return self._said if self._fd is None else None

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _open(self) -> os.stat_result | None:
        """Open the file the path names now; ``None`` when there is none or it is refused
        (the previous descriptor is closed either way: it is not the file any more)."""
        try:
            fd = open_log(self.source)
        except OSError:  # not there (yet), or gone between a look and the open
            fd = None
        except safefile.UnsafeFile as exc:
            self._refusal = str(exc)
            fd = None
        self.close()
        self._inode = None
        if fd is None:
            return None
        self._fd = fd
        self._refusal = self._said = None
        st = os.fstat(fd)
        self._inode = st.st_ino
        return st

    def _refusal_note(self) -> list[Piece]:
        """The reason the file is not read, once per reason."""
        if self._refusal is None or self._refusal == self._said:
            return []
        self._said = self._refusal
        return [Piece("note", f"not read: {self._refusal}".encode())]

    # ------------------------------------------------------------------ the past

    def read_past(self, lines: int | None = None, since: float | None = None) -> Iterator[Piece]:
        """What the file holds now (the last ``lines`` lines, or since ``since``), piece by
        piece as it is read."""
        st = self._open()
        if st is None:
            self._marks = [(a, None) for a in self.attempts] if self._marking else []
            return iter(self._refusal_note())
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
        self._partial, self._cutting = b"", False
        self._marks = [(a, st.st_ino) for a in marks if a.offset is not None and a.offset >= start]
        if not self._marking:
            self._marks = []
        if lines is None:
            return self._read_to(size)
        # the tail is held to drop what a mark pushed over the count: ``lines`` lines of at
        # most ``max_line`` bytes each, whatever the file's size
        return iter(self._last_lines(list(self._read_to(size)), lines))

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
            # late: the output read already cannot be taken back; mark now
            self._cutting = False
            return [*self._take_partial(), Piece("mark", mark_text(attempt), at=attempt.t)]
        self._marks.append((attempt, inode))
        self._marks.sort(key=lambda m: m[0].offset or 0)
        return []

    def poll(self) -> Iterator[Piece]:
        """What was appended since the last read (following truncation and rotation)."""
        if self._fd is None:
            if self._open() is None:
                yield from self._refusal_note()
                return
            self.pos, self._cutting = 0, False
        assert self._fd is not None
        try:
            path_inode: int | None = os.stat(self.source.path).st_ino
        except OSError:
            path_inode = None  # moved away: the old file may still be written to
        size = os.fstat(self._fd).st_size
        if size < self.pos:
            yield from self._take_partial()
            yield Piece("note", b"log file truncated: following it from its start")
            self.pos, self._cutting = 0, False
        yield from self._read_to(size)
        if path_inode is not None and path_inode != self._inode:
            yield from self._take_partial()
            st = self._open()
            self.pos, self._cutting = 0, False
            if st is None:
                yield from self._refusal_note()
                return
            yield Piece("note", b"log file replaced (rotated): following the new file")
            yield from self._read_to(st.st_size)

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

    def _marks_at(self, offset: int) -> list[Piece]:
        out: list[Piece] = []
        for mark in self._due(offset):
            self._marks.remove(mark)
            out += self._take_partial()
            self._cutting = False  # the new attempt's output starts a line of its own
            out.append(Piece("mark", mark_text(mark[0]), at=mark[0].t))
        return out

    def _read_to(self, end: int) -> Iterator[Piece]:
        if self._fd is None:
            return
        while self.pos < end:
            yield from self._marks_at(self.pos)
            limit = end
            due = self._due()
            if due:
                limit = min(end, max(self.pos + 1, due[0][0].offset or 0))
            try:
                data = os.pread(self._fd, min(CHUNK, limit - self.pos), self.pos)
            except OSError as exc:
                yield Piece("note", f"log file cannot be read further: {exc.strerror}".encode())
                break
            if not data:
                break
            self.pos += len(data)
            yield from self._feed(data)
        yield from self._marks_at(self.pos)

    def _feed(self, data: bytes) -> Iterator[Piece]:
        if self._cutting:
            newline = data.find(b"\n")
            if newline < 0:
                return  # still inside the line that was cut
            self._cutting = False
            data = data[newline + 1 :]
        previous = self._partial
        parts = (previous + data).split(b"\n") if previous else data.split(b"\n")
        self._partial = parts.pop()
        # each line's end: the file offset just past its newline (when it was written, by
        # the size history); the first line began with the unfinished one kept from before
        end = self.pos - len(data) - len(previous)
        for part in parts:
            end += len(part) + 1
            yield (
                self._cut(part, end) if len(part) > self.max_line else Piece("line", part, end=end)
            )
        if len(self._partial) > self.max_line:
            yield self._cut(self._partial, self.pos)
            self._partial, self._cutting = b"", True

    def _cut(self, line: bytes, end: int) -> Piece:
        cut = line[: _char_start(line, self.max_line)] + cut_text(self.max_line)
        return Piece("line", cut, end=end)
