"""The host's real memory: what is available now and whether tasks stall waiting for it.

A configured budget says what the owner lets oarbank use; it knows nothing of what the
rest of the host does with its memory. So the node agent also reads the kernel's own
numbers: ``MemAvailable`` (through psutil, which reads ``/proc/meminfo`` on Linux and the
equivalents elsewhere) and, where the kernel has pressure stall information, the share of
the last 10 s in which some task stalled on memory (``/proc/pressure/memory``, "some
avg10"). The budget stays an upper bound: what may be charged is the lesser of the two.

The reading is a plain callable so an agent can be given another one (a test's, or a
cgroup's view of memory) without anything else changing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

GB = 1024**3
PSI_MEMORY = Path("/proc/pressure/memory")


@dataclass(frozen=True)
class HostMemory:
    """One reading of the host's memory."""

    available_gb: float
    #: percent of the last 10 s some task stalled on memory; None without PSI
    psi_some_avg10: float | None = None


MemoryGauge = Callable[[], HostMemory]


def read_psi_some_avg10(path: Path = PSI_MEMORY) -> float | None:
    """``some avg10`` from a PSI file; None when the kernel has no PSI (or it is off)."""
    try:
        text = path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "some":
            for item in fields[1:]:
                key, _, value = item.partition("=")
                if key == "avg10":
                    try:
                        number = float(value)
                    except ValueError:
                        return None
                    return number if 0.0 <= number <= 100.0 else None
    return None


def read_host_memory() -> HostMemory:
    """The host's memory now (MemAvailable, PSI where present)."""
    return HostMemory(psutil.virtual_memory().available / GB, read_psi_some_avg10())


@dataclass(frozen=True)
class HostLimits:
    """How the agent reads a host reading: what to keep free, and what pressure is."""

    gauge: MemoryGauge = read_host_memory
    #: memory kept free for everything that is not oarbank's
    min_free_gb: float = 1.0
    #: PSI "some avg10" (percent) above which the host is under pressure; None: ignore PSI
    psi_limit: float | None = 10.0

    def __post_init__(self) -> None:
        if self.min_free_gb < 0:
            raise ValueError("min_free_gb must be >= 0")
        if self.psi_limit is not None and not 0 <= self.psi_limit <= 100:
            raise ValueError("psi_limit must be a percentage (0 to 100)")

    def stalled(self, reading: HostMemory) -> bool:
        return (
            self.psi_limit is not None
            and reading.psi_some_avg10 is not None
            and reading.psi_some_avg10 > self.psi_limit
        )

    def free_gb(self, reading: HostMemory) -> float:
        """What may still be charged on this host: nothing while tasks stall on memory."""
        if self.stalled(reading):
            return 0.0
        return max(reading.available_gb - self.min_free_gb, 0.0)

    def shortfall_gb(self, reading: HostMemory) -> float:
        """How far the host is below what must stay free (> 0 under pressure)."""
        if self.stalled(reading):
            return max(self.min_free_gb - reading.available_gb, 0.0) or 1e-6
        return max(self.min_free_gb - reading.available_gb, 0.0)
