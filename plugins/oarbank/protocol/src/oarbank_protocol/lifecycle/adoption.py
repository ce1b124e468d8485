"""Adoption: after an agent restart, take over a service that still runs, never start a
second one, and never take over a stranger.

The spec: "fingerprint.running tells the agent to adopt a running service rather than start
a second one." So the module's answer is the truth about *whether* it runs. The agent's
state file adds one guard and one memory:

* the guard: the state file recorded the service's PID with its kernel start time. If the
  module reports that same PID but the process behind it started at another time, the PID
  was recycled: the service we knew is gone and the PID is someone else's. We refuse to
  adopt it and never signal it (the agent signals services only through the protocol
  anyway), and count the loss as a failure;
* the memory: a service the file says was running, that runs no more, stopped while the
  agent was away: a failure too (a manual one is ``failed``: the agent never restarts it).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from oarbank_protocol.documents import Fingerprint
from oarbank_protocol.execution import process_identity
from oarbank_protocol.lifecycle.states import RUNNING_STATES


class Adoption(Enum):
    """What recovery found."""

    #: it runs: take it over
    ADOPT = "adopt"
    #: "running", under a recorded PID that now belongs to another process
    REFUSE_REUSED_PID = "refuse_reused_pid"
    #: recorded as running, runs no more
    STOPPED_WHILE_AWAY = "stopped_while_away"
    #: not running, and nothing says it was
    NOTHING = "nothing"


def pid_reused(fp: Fingerprint, record: Mapping[str, Any] | None) -> bool:
    """Whether the PID ``fp`` reports is the recorded one, now a different live process."""
    if not record or fp.pid is None or fp.pid != record.get("pid"):
        return False
    ticks = record.get("pid_start_ticks")
    return (
        ticks is not None
        and process_identity.alive(fp.pid)
        and not process_identity.same_process(fp.pid, ticks)
    )


def decide(fp: Fingerprint, record: Mapping[str, Any] | None) -> Adoption:
    """What to do with a service, given its first fingerprint and (when trusted) its record."""
    if fp.running:
        return Adoption.REFUSE_REUSED_PID if pid_reused(fp, record) else Adoption.ADOPT
    recorded_state = str(record.get("state", "")) if record else ""
    if recorded_state in RUNNING_STATES:
        return Adoption.STOPPED_WHILE_AWAY
    return Adoption.NOTHING
