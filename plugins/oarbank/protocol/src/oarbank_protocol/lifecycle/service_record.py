"""One service's entry in the agent's state file: what is saved, and what is believed back.

The manager saves every service's record on every state change (before the change is
announced, so whoever reacts to it finds the same facts on disk); the state store makes the
write atomic and tells, on load, whether the file can be trusted (written by this boot, not
corrupt). Saved: the state and its reason, the counters, the service's PID with its kernel
start time (the adoption guard), the users, the restart budget and the ids a failed stop
left.

Restored: the counters and leftovers always (they are history, harmless if stale); the
restart budget only from a trusted file (its timestamps are CLOCK_MONOTONIC readings,
meaningful within one boot). Users never: attempts re-admit after an agent restart, and a
stale user must never pin an on_demand service forever. The PID and state are not restored
here either: they only inform adoption (:mod:`~oarbank_protocol.lifecycle.adoption`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from oarbank_protocol.lifecycle.restart import RestartBudget


class Recorded(Protocol):
    """The facts of a service that its record holds."""

    @property
    def state(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def pid_start_ticks(self) -> int | None: ...
    @property
    def users(self) -> Iterable[str]: ...
    @property
    def restarts(self) -> RestartBudget: ...

    restart_count: int
    start_attempts: int
    leftover_ids: list[str]


def to_record(service: Recorded) -> dict[str, Any]:
    return {
        "state": str(service.state),
        "reason": service.reason,
        "restart_count": service.restart_count,
        "start_attempts": service.start_attempts,
        "pid": service.pid,
        "pid_start_ticks": service.pid_start_ticks,
        "users": sorted(service.users),
        "tracker": service.restarts.to_record(),
        "leftover_ids": list(service.leftover_ids),
    }


def restore(service: Recorded, record: Mapping[str, Any], *, trusted: bool) -> None:
    """Take back what a record may tell (see the module docstring); malformed values are
    skipped, never fatal."""
    with contextlib.suppress(TypeError, ValueError):
        service.restart_count = max(int(record.get("restart_count", 0)), 0)
        service.start_attempts = max(int(record.get("start_attempts", 0)), 0)
    leftovers = record.get("leftover_ids")
    if isinstance(leftovers, list):
        service.leftover_ids = [str(x) for x in leftovers]
    if trusted:
        tracker = record.get("tracker")
        if isinstance(tracker, dict):
            service.restarts.restore(tracker)
