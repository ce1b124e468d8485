"""What an ``srt_status_sections`` implementation returns: a part of ``srt status``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class StatusSection:
    """What a plugin knows about a job's current state beyond its instances (a node
    agent's admissions and pool use), below core's table.

    ``srt status`` is read while the job runs and after it ended, often in a loop
    (``--watch``): build it from what is quick to ask (a local socket, a file), never wait
    long. ``lines`` are plain text (no colour, no terminal width assumed); ``data`` is what
    ``srt status --json`` shows under ``sections``, so scripts need not parse the lines.
    """

    #: the section's heading
    title: str
    #: its text, one line each
    lines: tuple[str, ...] = ()
    #: the same as JSON-able data
    data: Mapping[str, Any] = field(default_factory=dict)
    #: where it goes among the plugins' sections (ties keep pluggy's call order)
    order: int = 100
