"""What state a supervised service is in, and how it looks from outside.

The states, and which of them withdraw the service's capabilities, are the vocabulary every
part of the lifecycle shares (the supervisor moves between them, the manager admits by
them, the agents report them), so they live apart from the machine that drives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from oarbank_protocol.lifecycle.reaper import ReapReport


class ServiceState(StrEnum):
    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    BACKOFF = "backoff"
    UNHEALTHY = "unhealthy"
    FAILED = "failed"
    UNSUPPORTED = "unsupported"


#: States in which the service offers no capability until a fingerprint shows recovery or
#: an operator resets it (``unsupported``: never, on this platform).
WITHDRAWN_STATES = frozenset(
    {ServiceState.UNHEALTHY, ServiceState.FAILED, ServiceState.UNSUPPORTED}
)

#: States a state file may record for a service that was running when its agent went away.
RUNNING_STATES = frozenset({ServiceState.READY, ServiceState.STARTING, ServiceState.STOPPING})


@dataclass(frozen=True)
class ServiceSnapshot:
    name: str
    lifecycle: str
    state: str
    reason: str
    available: bool
    unavailable_reason: str
    users: tuple[str, ...]
    health: str
    running: bool
    restart_count: int
    start_attempts: int
    failures_in_window: int
    pid: int | None
    adopted: bool
    leftover_ids: tuple[str, ...]
    last_reap: ReapReport | None = None
    extra: dict[str, Any] = field(default_factory=dict)
