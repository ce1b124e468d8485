"""Built-in placements: ``placement.node`` values and ``placement.pool``."""

from __future__ import annotations

from typing import ClassVar

from srt_services.contracts.context import Layout, Node
from srt_services.contracts.placement import Placement
from srt_services.recipe.models import ROLE_NAMES


class Head(Placement):
    name: ClassVar[str] = "head"
    summary: ClassVar[str] = "The job's head node (first engine node, or first pool node)."
    single_node: ClassVar[bool] = True

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        return (layout.head,)


class Infra(Placement):
    name: ClassVar[str] = "infra"
    summary: ClassVar[str] = "The infra node: the head, or the dedicated node when one is reserved."
    single_node: ClassVar[bool] = True

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        return (layout.infra,)


class Dedicated(Infra):
    name: ClassVar[str] = "dedicated"
    summary: ClassVar[str] = "A node reserved for the infra services (the job asks for one more)."
    reserves_infra_node: ClassVar[bool] = True


class _Role(Placement):
    role: ClassVar[str]

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        return tuple(layout.role_nodes.get(self.role, ()))


class Prefill(_Role):
    name: ClassVar[str] = "prefill"
    role: ClassVar[str] = "prefill"
    summary: ClassVar[str] = "Every node the prefill workers use."
    worker_roles: ClassVar[frozenset[str] | None] = frozenset({"prefill"})


class Decode(_Role):
    name: ClassVar[str] = "decode"
    role: ClassVar[str] = "decode"
    summary: ClassVar[str] = "Every node the decode workers use."
    worker_roles: ClassVar[frozenset[str] | None] = frozenset({"decode"})


class Agg(_Role):
    name: ClassVar[str] = "agg"
    role: ClassVar[str] = "agg"
    summary: ClassVar[str] = "Every node the aggregated workers use."
    worker_roles: ClassVar[frozenset[str] | None] = frozenset({"agg"})


class Workers(Placement):
    name: ClassVar[str] = "workers"
    summary: ClassVar[str] = "Every engine worker node (for a pool owner: its own pool)."
    worker_roles: ClassVar[frozenset[str] | None] = frozenset(ROLE_NAMES)

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        if pool is not None:
            return tuple(layout.pools.get(pool, ()))
        return layout.worker_nodes


class Compute(Placement):
    name: ClassVar[str] = "compute"
    summary: ClassVar[str] = "Every engine worker node plus every pool node."

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        return layout.compute


class All(Placement):
    name: ClassVar[str] = "all"
    summary: ClassVar[str] = "Every node of the job: head, infra, client, workers and pools."

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        return layout.all


class Pool(Placement):
    name: ClassVar[str] = "pool"
    summary: ClassVar[str] = "The nodes a service with `nodes:` owns (`placement.pool: <owner>`)."

    def nodes(self, layout: Layout, pool: str | None = None) -> tuple[Node, ...]:
        return tuple(layout.pools.get(pool or "", ()))


BUILTIN_PLACEMENTS: list[type[Placement]] = [
    Head,
    Infra,
    Dedicated,
    Prefill,
    Decode,
    Agg,
    Workers,
    Compute,
    All,
    Pool,
]
