"""``events.jsonl`` followed as it grows (``srt events -f``): complete lines only, woken by
inotify on the job directory, checked once a period anyway (a Slurm job's orchestrator
writes from another host, whose writes inotify does not see)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any


class EventReader:
    """The events appended to ``path`` since the last read (a cut last line waits)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.pos = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.pos)
                data = fh.read()
        except FileNotFoundError:
            return []
        self.pos += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        out = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("event"), str):
                out.append(record)
        return out


def follow_events(
    path: str, over: Callable[[], bool], period: float = 2.0
) -> Iterator[list[dict[str, Any]]]:
    """Batches of new events of ``path`` (the first: all there are) until ``over()`` says
    the job ended and its ``job_finished`` came (the orchestrator writes its result before
    its last events; at most ``period`` seconds are given to them)."""
    from inotify_simple import flags

    from srt_services.inotify import open_inotify

    reader = EventReader(path)
    inotify = open_inotify()
    try:
        inotify.add_watch(os.path.dirname(path) or ".", flags.MODIFY | flags.CREATE)
        batch = reader.read()
        yield batch
        ended_at: float | None = None
        while True:  # a job_finished counts only once the job is over (a rerun's dir)
            finished = any(r["event"] == "job_finished" for r in batch)
            if ended_at is None and over():
                ended_at = time.monotonic()
            if ended_at is not None and (finished or time.monotonic() - ended_at > period):
                break
            inotify.read(timeout=int(period * 1000 if ended_at is None else 100), read_delay=10)
            batch = reader.read()
            if batch:
                yield batch
    finally:
        inotify.close()
