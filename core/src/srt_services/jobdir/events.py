"""``events.jsonl``: one JSON object per line, each with wall and monotonic timestamps.

Events are open-ended (a new event or field needs no change here): the file is a log for
people, ``srt run``'s display and tests, never a source of decisions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import orjson

#: Event lines kept in memory while the file cannot be written (about: kept as bytes, at
#: most this many lines of 256 bytes; the oldest go first).
MAX_BACKLOG = 10_000


class EventLog:
    """``events.jsonl`` writer: one line per event.

    Lines are buffered and written once per event-loop turn (a burst of 200 launches is one
    write), and immediately when no loop runs; ``close`` writes what is left. Observers (the
    progress display) see each event at once and flush with the file.
    """

    def __init__(self, path: str, on_event: Callable[[dict[str, Any]], None] | None = None) -> None:
        # not through a link planted where the file goes (O_NOFOLLOW)
        fd = os.open(
            path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        self._fh = open(fd, "ab", buffering=0)  # noqa: SIM115 - lives as long as the job
        self._pending: list[bytes] = []
        self._scheduled = False
        self.on_event = on_event
        #: told when a write fails (the lines are kept, up to ``MAX_BACKLOG``)
        self.on_error: Callable[[OSError], None] | None = None

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"t": round(time.time(), 6), "mono": round(time.monotonic(), 6), "event": event}
        record.update({k: v for k, v in fields.items() if v is not None})
        if self._fh.closed:  # after the job's end (a signal's callback running late)
            return record
        self._pending.append(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        if self.on_event is not None:
            try:
                self.on_event(record)
            except Exception:
                self.on_event = None
        if not self._scheduled:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
            else:
                self._scheduled = True
                loop.call_soon(self.flush)
        return record

    def flush(self) -> None:
        self._scheduled = False
        if self._pending and not self._fh.closed:
            data = b"".join(self._pending)
            self._pending.clear()
            try:
                while data:
                    # a disk that fills up mid-write takes part of it: keep the rest
                    written = self._fh.write(data) or 0
                    data = data[written:]
            except OSError as exc:
                # a full or read-only disk: keep the newest lines for a later flush (bounded)
                # and tell the owner once; a log for people must never stop the job
                self._pending.append(data)
                if len(data) > MAX_BACKLOG * 256:
                    cut = data.find(b"\n", len(data) - MAX_BACKLOG * 256)
                    self._pending[0] = data[cut + 1 :] if cut >= 0 else b""
                if self.on_error is not None:
                    self.on_error(exc)
        flush = getattr(self.on_event, "flush", None)
        if flush is not None:
            try:
                flush()
            except Exception:
                self.on_event = None

    def close(self) -> None:
        self.flush()
        with contextlib.suppress(OSError):
            self._fh.close()


#: An event line longer than this is no event srt wrote (they are a few hundred bytes): it
#: is skipped without being held in memory.
MAX_EVENT_LINE = 256 * 1024
_CHUNK = 1 << 20


def iter_lines(fd: int, max_line: int = MAX_EVENT_LINE) -> Iterator[bytes]:
    """The lines of ``fd`` (the last one also without its newline), each at most
    ``max_line`` bytes; longer ones are skipped. Memory: one chunk and one line."""
    pos = 0
    partial = b""
    skipping = False
    while True:
        chunk = os.pread(fd, _CHUNK, pos)
        if not chunk:
            if partial and not skipping:
                yield partial
            return
        pos += len(chunk)
        lines = chunk.split(b"\n")
        for i, piece in enumerate(lines):
            last = i == len(lines) - 1
            if last:
                if skipping:
                    break
                partial += piece
                if len(partial) > max_line:
                    partial, skipping = b"", True
                break
            if skipping:
                skipping = False
                continue
            line, partial = partial + piece, b""
            if len(line) <= max_line:
                yield line


def decode_event(line: bytes) -> dict[str, Any] | None:
    """One line as an event, or ``None`` (not JSON, nested deeper than orjson's limit of
    1024, not an object, no ``event`` name: an edited file or a line cut by a crash)."""
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if isinstance(record, dict) and isinstance(record.get("event"), str):
        return record
    return None


def iter_events(path: str) -> Iterator[dict[str, Any]]:
    """Every complete event of ``path`` (none when it does not exist), streamed.

    The file is opened like every job file (:mod:`srt_services.safefile`): a FIFO, a device
    or a link out of the job directory there is :class:`~srt_services.safefile.UnsafeFile`.
    """
    from srt_services.safefile import open_beneath

    root, name = os.path.split(path)
    try:
        fd = open_beneath(root or ".", name)
    except FileNotFoundError:
        return
    try:
        for line in iter_lines(fd):
            record = decode_event(line)
            if record is not None:
                yield record
    finally:
        os.close(fd)


def read_events(path: str) -> list[dict[str, Any]]:
    """Every complete event of ``path`` (none when it does not exist)."""
    return list(iter_events(path))
