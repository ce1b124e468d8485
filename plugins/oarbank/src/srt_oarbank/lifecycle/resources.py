"""The node's pool tokens and host-memory budget, as one synchronous ledger.

Checks and reservations happen in a single synchronous call (no ``await`` in between), so two
admissions racing on one event loop can never both take the last token. Everything is keyed
by holder (an attempt, or ``service:<name>`` for a running service's reservation) and released
by key, which makes release idempotent and keeps the books balanced across any number of
crash and restart cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from srt_oarbank.protocol.errors import MemoryExhausted, PoolExhausted


@dataclass(frozen=True)
class ResourceSnapshot:
    capacity: dict[str, int]
    reserved: dict[str, int]
    mem_budget_gb: float | None
    mem_charged_gb: float
    charges: dict[str, float] = field(default_factory=dict)


class NodeResources:
    """Pool capacity comes from providers' fingerprints; reservations from admissions."""

    def __init__(self, mem_budget_gb: float | None = None) -> None:
        if mem_budget_gb is not None and mem_budget_gb < 0:
            raise ValueError("mem_budget_gb must be >= 0")
        self.mem_budget_gb = mem_budget_gb
        self._capacity: dict[str, dict[str, int]] = {}  # provider -> pool -> tokens
        self._reservations: dict[str, dict[str, int]] = {}  # holder -> pool -> tokens
        self._charges: dict[str, float] = {}  # holder -> GB

    # -- pools

    def set_capacity(self, provider: str, pools: Mapping[str, int]) -> None:
        self._capacity[provider] = {k: int(v) for k, v in pools.items() if v > 0}

    def clear_capacity(self, provider: str) -> None:
        self._capacity.pop(provider, None)

    def capacity(self, pool: str) -> int:
        return sum(p.get(pool, 0) for p in self._capacity.values())

    def reserved(self, pool: str) -> int:
        return sum(r.get(pool, 0) for r in self._reservations.values())

    def check_pools(
        self, pools: Mapping[str, int], needs_pools: frozenset[str] = frozenset()
    ) -> None:
        for pool in sorted(needs_pools):
            if self.capacity(pool) <= 0:
                raise PoolExhausted(pool, 1, 0, self.reserved(pool))
        for pool, count in sorted(pools.items()):
            if count <= 0:
                continue
            capacity, reserved = self.capacity(pool), self.reserved(pool)
            if reserved + count > capacity:
                raise PoolExhausted(pool, count, capacity, reserved)

    def reserve(self, holder: str, pools: Mapping[str, int]) -> None:
        """Check and reserve in one step; on refusal nothing is reserved."""
        self.check_pools(pools)
        wanted = {k: int(v) for k, v in pools.items() if v > 0}
        if wanted:
            current = self._reservations.setdefault(holder, {})
            for pool, count in wanted.items():
                current[pool] = current.get(pool, 0) + count

    def release(self, holder: str) -> None:
        self._reservations.pop(holder, None)
        self._charges.pop(holder, None)

    # -- memory

    @property
    def mem_charged_gb(self) -> float:
        return sum(self._charges.values())

    def mem_free_gb(self) -> float | None:
        if self.mem_budget_gb is None:
            return None
        return self.mem_budget_gb - self.mem_charged_gb

    def charged(self, holder: str) -> float:
        return self._charges.get(holder, 0.0)

    def check_memory(self, needed: Mapping[str, float]) -> None:
        """``needed`` maps new holders to GB; raises with the numbers when they do not fit."""
        extra = sum(gb for holder, gb in needed.items() if holder not in self._charges)
        free = self.mem_free_gb()
        if free is None or extra <= 1e-9 or extra <= free + 1e-9:
            return
        detail = " + ".join(
            f"{holder} {gb:g} GB" for holder, gb in needed.items() if holder not in self._charges
        )
        assert self.mem_budget_gb is not None
        raise MemoryExhausted(extra, max(free, 0.0), self.mem_budget_gb, detail)

    def charge(self, holder: str, gb: float) -> None:
        """Idempotent per holder; the budget is checked by :meth:`check_memory` beforehand."""
        if gb > 0:
            self._charges[holder] = gb
        else:
            self._charges.pop(holder, None)

    def discharge(self, holder: str) -> None:
        self._charges.pop(holder, None)

    def snapshot(self) -> ResourceSnapshot:
        pools = sorted({p for c in self._capacity.values() for p in c})
        reserved_pools = sorted({p for r in self._reservations.values() for p in r})
        return ResourceSnapshot(
            capacity={p: self.capacity(p) for p in pools},
            reserved={p: self.reserved(p) for p in reserved_pools},
            mem_budget_gb=self.mem_budget_gb,
            mem_charged_gb=self.mem_charged_gb,
            charges=dict(self._charges),
        )
