"""``srt logs -f``: new lines as they are written, from every selected log, until the job
ends.

One inotify descriptor watches the directories the logs are in (a directory watch reports
each file written, created, moved or deleted in it, so a log that does not exist yet, a
restart and a rotation are all seen) and the job directory (``events.jsonl``: a new attempt
to mark; ``result.json``: the job is over). A wake-up reads only the files it names. When
nothing happens for ``period`` seconds the loop checks everything once: an inotify watch
sees only this host's writes, and on a shared filesystem a Slurm job's logs are written by
other nodes; that check also shows a line left unfinished for that long, and asks whether
the job is still running. An overflowed inotify queue means the same full check.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from srt_services import safefile
from srt_services.errors import SrtError
from srt_services.jobdir.attempts import Attempt, attempts_by_step
from srt_services.jobdir.events import MAX_EVENT_LINE, decode_event
from srt_services.jobdir.layout import RESULT, JobDir
from srt_services.logview.logfile import LogFile, Piece
from srt_services.logview.printer import Printer


class EventsTail:
    """``events.jsonl`` read incrementally: the attempts launched since the last read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pos = 0
        self._partial = b""
        self._skipping = False
        self._seen: dict[str, int] = {}
        self._history: list[dict[str, Any]] = []
        #: steps whose last attempt exited and whose next one is not recorded yet: what
        #: their log gets now is the next attempt's output, to be shown after its mark
        self.between: set[str] = set()

    def skip_to_end(self) -> None:
        """Start from what is there now (the past was read in one go)."""
        self.new_attempts()

    def new_attempts(self) -> dict[str, list[Attempt]]:
        """step -> attempts that appeared since the last call."""
        root, name = os.path.split(self.path)
        try:
            fd = safefile.open_beneath(root or ".", name)
        except (OSError, SrtError):
            return {}  # not there yet, or not a file srt reads (``srt logs`` said so at start)
        fresh = False
        try:
            size = os.fstat(fd).st_size
            while self.pos < size:
                # a bounded piece at a time; a line longer than any event is skipped whole,
                # as every reader of events.jsonl does
                data = os.pread(fd, min(size - self.pos, MAX_EVENT_LINE * 4), self.pos)
                if not data:
                    break
                self.pos += len(data)
                fresh = self._take(data) or fresh
        except OSError:
            pass
        finally:
            os.close(fd)
        if not fresh:
            return {}
        out: dict[str, list[Attempt]] = {}
        for step, attempts in attempts_by_step(self._history).items():
            seen = self._seen.get(step, 0)
            if len(attempts) > seen:
                out[step] = attempts[seen:]
                self._seen[step] = len(attempts)
        return out

    def _take(self, data: bytes) -> bool:
        """Whether ``data`` (the next bytes of the file) completes a ``launched`` event."""
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        fresh = False
        for line in lines:
            if self._skipping:
                self._skipping = False  # the end of the over-long line
                continue
            event = decode_event(line)
            if event is not None:
                self._history.append(event)
                self._note_between(event)
                fresh = fresh or event.get("event") == "launched"
        if len(self._partial) > MAX_EVENT_LINE:
            self._partial, self._skipping = b"", True
        return fresh

    def _note_between(self, event: dict[str, Any]) -> None:
        step = event.get("step")
        if not isinstance(step, str):
            return
        if event.get("event") == "exited":
            self.between.add(step)
        elif event.get("event") == "launched":
            self.between.discard(step)


class _Follower:
    def __init__(self, job: JobDir, files: list[LogFile], printer: Printer, period: float) -> None:
        from inotify_simple import flags

        from srt_services.inotify import open_inotify

        self.job = job
        self.files = files
        self.printer = printer
        self.events = EventsTail(job.events_file)
        self.events.skip_to_end()
        self.inotify = open_inotify()
        self.flags = flags
        self.mask = (
            flags.MODIFY
            | flags.CREATE
            | flags.MOVED_TO
            | flags.MOVED_FROM
            | flags.DELETE
            | flags.CLOSE_WRITE
        )
        # a log named outside the job directory is never read: its directory is not watched
        self.directories = {
            os.path.dirname(f.source.path)
            for f in files
            if os.path.commonpath([os.path.abspath(f.source.path), os.path.abspath(job.path)])
            == os.path.abspath(job.path)
        } | {job.path}
        self.watched: dict[int, str] = {}
        self.watch()
        self.period = period
        #: log files held back since when (their step is between attempts)
        self.held: dict[int, float] = {}

    def watch(self) -> None:
        for directory in self.directories - set(self.watched.values()):
            try:
                self.watched[self.inotify.add_watch(directory, self.mask)] = directory
            except OSError:
                continue  # not there yet: tried again on the next full check

    def show(self, f: LogFile, pieces: Iterable[Piece]) -> None:
        if not self.printer.timestamps:
            self.printer.write(f.source.name, pieces)
            return
        # followed: a line is seen within milliseconds of its write (inotify), so the
        # time it was read is when it was written
        now = time.time()
        self.printer.write_merged((f.source.name, p, p.at or now) for p in pieces)

    def read_attempts(self) -> None:
        for step, attempts in self.events.new_attempts().items():
            for f in self.files:
                if f.source.step == step:
                    for attempt in attempts:
                        self.show(f, f.add_attempt(attempt))
                    if self.held.pop(id(f), None) is not None:
                        self.show(f, f.poll())  # what was held back, now after its mark

    def hold(self, f: LogFile) -> bool:
        """Whether to leave ``f`` unread for now: its instance exited and was not launched
        again yet, so what it got is the next attempt's output, written before the launch
        was recorded (the process runs before its pid can be written down). Held at most
        ``period`` seconds, so a write that belongs to no new attempt is shown anyway."""
        step = f.source.step
        if step is None or step not in self.events.between:
            return False
        since = self.held.setdefault(id(f), time.monotonic())
        if time.monotonic() - since < self.period:
            return True
        del self.held[id(f)]
        return False

    def changes(self, timeout: float) -> tuple[set[str], bool]:
        """The paths inotify reported within ``timeout``, and whether it overflowed."""
        got = self.inotify.read(timeout=int(timeout * 1000), read_delay=10)
        changed = set()
        for ev in got:
            directory = self.watched.get(ev.wd)
            if directory is not None and ev.name:
                changed.add(os.path.join(directory, ev.name))
        return changed, any(ev.mask & self.flags.Q_OVERFLOW for ev in got)

    def round(self, changed: set[str] | None, final: bool = False) -> None:
        """Read what ``changed`` names (``None``: everything; ``final``: nothing held)."""
        # first, so a new attempt's mark is known before its first lines are read (its
        # launch is recorded right after the process started, often after it wrote)
        self.read_attempts()
        for f in self.files:
            named = changed is None or f.source.path in changed
            if named and (final or not self.hold(f)):
                self.show(f, f.poll())
        if changed is None:
            self.watch()
            for f in self.files:
                if final or id(f) not in self.held:
                    self.show(f, f.flush_partial())
        self.printer.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.inotify.close()


def follow(
    job: JobDir,
    files: list[LogFile],
    printer: Printer,
    over: Callable[[], bool],
    period: float = 2.0,
) -> None:
    """Print what the ``files`` get until ``over()`` says the job ended (then the rest)."""
    follower = _Follower(job, files, printer, period)
    result = job.file(RESULT)
    try:
        last_full = time.monotonic()
        while True:
            changed, overflow = follower.changes(period)
            full = not changed or overflow or time.monotonic() - last_full >= period
            follower.round(None if full else changed)
            if full:
                last_full = time.monotonic()
            if result in changed or (full and over()):
                break
        follower.round(None, final=True)  # what was written just before the end
    finally:
        follower.close()
