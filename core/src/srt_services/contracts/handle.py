"""What a launcher hands back: a launched attempt of an instance, or a one-shot step's result."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Handle:
    """A running attempt. ``pid`` is the local process whose exit is the attempt's exit:
    the service itself (local launcher) or the ``srun`` client of its step (Slurm)."""

    step: str
    unit: str
    node: str
    pid: int
    pgid: int
    #: filled in lazily (see ``process.spawn``); ``None`` until then
    start_ticks: int | None
    log_path: str
    log_offset: int
    started_wall: float
    started_mono: float
    popen: subprocess.Popen[bytes] | None = None
    returncode: int | None = None
    #: Launcher-specific data (Slurm: the step id), persisted in state.json.
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class CommandResult:
    """A one-shot step (a clone, a build) that ran to its end, or was stopped at its bound."""

    code: int
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.code == 0 and not self.timed_out
