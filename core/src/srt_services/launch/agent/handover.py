"""What the agent's first part hands its second: the instances it started.

A module of its own, standard library only, so that the first part (:mod:`.__main__`)
can build these before anything heavy is loaded and the second part (:mod:`.node`,
:mod:`.serve`) can name them without importing the first part back.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import subprocess
    from typing import Any


class Launched:
    """An instance the first part started, for :mod:`.serve` to supervise."""

    __slots__ = (
        "follow",
        "grace",
        "lid",
        "log",
        "pid",
        "popen",
        "ports",
        "step",
        "stop_signal",
        "ticks",
    )

    def __init__(
        self,
        lid: int,
        step: str,
        pid: int,
        popen: subprocess.Popen[bytes] | None,
        m: dict[str, Any],
    ):
        self.lid = lid
        self.step = step
        self.log: str = m["log"]
        self.pid = pid
        #: ``None`` when it was spawned without subprocess (all but an instance with a cwd)
        self.popen = popen
        self.grace = float(m.get("grace", 10.0))
        self.stop_signal: str = m.get("stop_signal", "TERM")
        self.follow: list[Any] = list(m.get("follow", []))
        self.ports = [int(p) for p in m.get("ports", [])]
        self.ticks: int | None = None
