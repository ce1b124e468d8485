"""The node's pool tokens and host-memory budget, as one synchronous ledger.

Checks and reservations happen in a single synchronous call (no ``await`` in between), so two
admissions racing on one event loop can never both take the last token. Everything is keyed
by holder (an attempt, or ``service:<name>`` for a running service's reservation) and released
by key, which makes release idempotent and keeps the books balanced across any number of
crash and restart cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from oarbank_protocol.errors import MemoryExhausted, PoolExhausted
from oarbank_protocol.lifecycle.host_memory import HostLimits


@dataclass(frozen=True)
class ResourceSnapshot:
    capacity: dict[str, int]
    reserved: dict[str, int]
    mem_budget_gb: float | None
    mem_charged_gb: float
    charges: dict[str, float] = field(default_factory=dict)


class _Ledger:
    """The node's books, shared by every module's view of them."""

    def __init__(self, mem_budget_gb: float | None, host: HostLimits | None) -> None:
        self.mem_budget_gb = mem_budget_gb
        self.host = host
        self.capacity: dict[str, dict[str, int]] = {}  # provider -> pool -> tokens
        self.reservations: dict[str, dict[str, int]] = {}  # holder -> pool -> tokens
        self.charges: dict[str, float] = {}  # holder -> GB
        #: called after any charge is dropped: memory came back, whoever dropped it
        self.freed_listeners: list[Callable[[], None]] = []

    def drop_charge(self, key: str) -> None:
        if self.charges.pop(key, None) is not None:
            for listener in list(self.freed_listeners):
                listener()


class NodeResources:
    """Pool capacity comes from providers' fingerprints; reservations from admissions.

    A node agent running several modules gives each module :meth:`scoped` view: pool,
    provider and holder names are the module's own (two modules may both call a pool
    ``containers`` or a service ``vm``), while the host-memory budget is the node's, shared
    by all of them.
    """

    def __init__(
        self, mem_budget_gb: float | None = None, *, host: HostLimits | None = None
    ) -> None:
        if mem_budget_gb is not None and mem_budget_gb < 0:
            raise ValueError("mem_budget_gb must be >= 0")
        self._ledger = _Ledger(mem_budget_gb, host)
        self._scope = ""

    def scoped(self, scope: str) -> NodeResources:
        """A view whose names live under ``scope`` on the same books and memory budget."""
        view = NodeResources.__new__(NodeResources)
        view._ledger = self._ledger
        view._scope = f"{self._scope}{scope}/"
        return view

    @property
    def mem_budget_gb(self) -> float | None:
        return self._ledger.mem_budget_gb

    @property
    def host(self) -> HostLimits | None:
        """How the host's real memory is read and judged (None: the budget alone)."""
        return self._ledger.host

    def _k(self, name: str) -> str:
        return self._scope + name

    def _mine(self, key: str) -> str | None:
        return key[len(self._scope) :] if key.startswith(self._scope) else None

    # -- pools

    def set_capacity(self, provider: str, pools: Mapping[str, int]) -> None:
        self._ledger.capacity[self._k(provider)] = {
            self._k(k): int(v) for k, v in pools.items() if v > 0
        }

    def clear_capacity(self, provider: str) -> None:
        self._ledger.capacity.pop(self._k(provider), None)

    def capacity(self, pool: str) -> int:
        key = self._k(pool)
        return sum(p.get(key, 0) for p in self._ledger.capacity.values())

    def reserved(self, pool: str) -> int:
        key = self._k(pool)
        return sum(r.get(key, 0) for r in self._ledger.reservations.values())

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
        wanted = {self._k(k): int(v) for k, v in pools.items() if v > 0}
        if wanted:
            current = self._ledger.reservations.setdefault(self._k(holder), {})
            for pool, count in wanted.items():
                current[pool] = current.get(pool, 0) + count

    def release(self, holder: str) -> None:
        self._ledger.reservations.pop(self._k(holder), None)
        self._ledger.drop_charge(self._k(holder))

    def on_memory_freed(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` whenever a charge is dropped, by any view of these books.

        Memory comes back in several ways (a release, an on_demand service's idle stop, a
        crash): whoever gave memory to another holder (a yield) must hear of all of them,
        not only of the release it happens to see.
        """
        self._ledger.freed_listeners.append(listener)

    # -- memory (the node's budget, whatever the scope)

    @property
    def mem_charged_gb(self) -> float:
        return sum(self._ledger.charges.values())

    def mem_free_gb(self) -> float | None:
        """What may still be charged: the budget's room, and no more than the host has."""
        budget = self._budget_free_gb()
        host = self._ledger.host
        if host is None:
            return budget
        room = host.free_gb(host.gauge())
        return room if budget is None else min(budget, room)

    def _budget_free_gb(self) -> float | None:
        if self.mem_budget_gb is None:
            return None
        return self.mem_budget_gb - self.mem_charged_gb

    def charged(self, holder: str) -> float:
        return self._ledger.charges.get(self._k(holder), 0.0)

    def check_memory(self, needed: Mapping[str, float]) -> None:
        """``needed`` maps new holders to GB; raises with the numbers when they do not fit."""
        charges = self._ledger.charges
        new = {h: gb for h, gb in needed.items() if self._k(h) not in charges}
        extra = sum(new.values())
        if extra <= 1e-9:
            return
        detail = " + ".join(f"{self._k(holder)} {gb:g} GB" for holder, gb in new.items())
        free = self._budget_free_gb()
        if free is not None and extra > free + 1e-9:
            assert self.mem_budget_gb is not None
            raise MemoryExhausted(extra, max(free, 0.0), self.mem_budget_gb, detail)
        host = self._ledger.host
        if host is None:
            return
        reading = host.gauge()
        room = host.free_gb(reading)
        if extra <= room + 1e-9:
            return
        if host.stalled(reading):
            why = (
                f"tasks stall on memory (PSI some avg10 {reading.psi_some_avg10:g}% > "
                f"{host.psi_limit:g}%)"
            )
        else:
            why = (
                f"{room:g} GB available on the host (MemAvailable "
                f"{reading.available_gb:.3g} GB, {host.min_free_gb:g} GB kept free)"
            )
        budget = self.mem_budget_gb
        raise MemoryExhausted(extra, room, budget if budget is not None else room, detail, host=why)

    def charge(self, holder: str, gb: float) -> None:
        """Idempotent per holder; the budget is checked by :meth:`check_memory` beforehand."""
        if gb > 0:
            self._ledger.charges[self._k(holder)] = gb
        else:
            self._ledger.drop_charge(self._k(holder))

    def discharge(self, holder: str) -> None:
        self._ledger.drop_charge(self._k(holder))

    def snapshot(self) -> ResourceSnapshot:
        """This view's pools and charges (its own names); memory totals are the node's."""
        pools = sorted(
            {m for c in self._ledger.capacity.values() for p in c if (m := self._mine(p))}
        )
        reserved_pools = sorted(
            {m for r in self._ledger.reservations.values() for p in r if (m := self._mine(p))}
        )
        return ResourceSnapshot(
            capacity={p: self.capacity(p) for p in pools},
            reserved={p: self.reserved(p) for p in reserved_pools},
            mem_budget_gb=self.mem_budget_gb,
            mem_charged_gb=self.mem_charged_gb,
            charges={
                m: gb for h, gb in self._ledger.charges.items() if (m := self._mine(h)) is not None
            },
        )
