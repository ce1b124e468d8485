"""Lifecycle events: what happened to which service, for logs, status files and tests.

Every state change goes through one :class:`EventLog`, which logs one line per event (state
changes only, never per poll) and keeps a bounded history that tests assert against.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

log = logging.getLogger("oarbank_protocol.lifecycle")

WARNING_KINDS = frozenset(
    {
        "exited_unexpectedly",
        "start_failed",
        "unhealthy",
        "failed",
        "lost",
        "refused_adoption",
        "capability_withdrawn",
        "stop_escalated",
        "reap_skipped",
        "reap_failed",
        "state_discarded",
        "fingerprint_failed",
        "protocol_violation",
        "stop_unverified",
    }
)


@dataclass(frozen=True)
class ManagerEvent:
    kind: str
    subject: str
    message: str
    at: float
    wall: float = field(default_factory=time.time)
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "message": self.message,
            "at": self.at,
            "wall": self.wall,
            "data": dict(self.data),
        }


EventSink = Callable[[ManagerEvent], None]


class Emit(Protocol):
    """How a part of one service's lifecycle announces an event about that service (the
    supervisor stamps it with the service's name and the clock's time)."""

    def __call__(self, kind: str, message: str, /, **data: Any) -> None: ...


class EventLog:
    def __init__(self, sink: EventSink | None = None, maxlen: int = 2000) -> None:
        self.history: deque[ManagerEvent] = deque(maxlen=maxlen)
        self.sink = sink

    def emit(self, event: ManagerEvent) -> None:
        self.history.append(event)
        level = logging.WARNING if event.kind in WARNING_KINDS else logging.INFO
        log.log(level, "%s %s: %s", event.subject, event.kind, event.message)
        if self.sink is not None:
            try:
                self.sink(event)
            except Exception:
                log.exception("event sink failed")

    def kinds(self, subject: str | None = None) -> list[str]:
        return [e.kind for e in self.history if subject is None or e.subject == subject]

    def of(self, kind: str, subject: str | None = None) -> list[ManagerEvent]:
        return [
            e for e in self.history if e.kind == kind and (subject is None or e.subject == subject)
        ]
