"""Built-in expansions: ``placement.per: node`` and ``placement.per: worker``."""

from __future__ import annotations

from typing import ClassVar

from srt_services.contracts.context import Layout, Node
from srt_services.contracts.expansion import Expansion, InstanceSeed


class PerNode(Expansion):
    name: ClassVar[str] = "node"
    summary: ClassVar[str] = "One instance per placed node (`service_<name>[_<node>]`)."

    def seeds(
        self,
        service: str,
        nodes: tuple[Node, ...],
        layout: Layout,
        worker_roles: frozenset[str] | None,
    ) -> list[InstanceSeed]:
        if len(nodes) == 1:
            return [InstanceSeed(node=nodes[0], step=f"service_{service}")]
        return [InstanceSeed(node=n, step=f"service_{service}_{n.name}") for n in nodes]


class PerWorker(Expansion):
    name: ClassVar[str] = "worker"
    summary: ClassVar[str] = (
        "One instance per engine worker (per node rank) on the placed nodes, in that worker's"
        " GPU view (`service_<name>_<role>_<index>_<node>`)."
    )
    needs_workers: ClassVar[bool] = True

    def seeds(
        self,
        service: str,
        nodes: tuple[Node, ...],
        layout: Layout,
        worker_roles: frozenset[str] | None,
    ) -> list[InstanceSeed]:
        placed = {n.name: n for n in nodes}
        found: list[tuple[int, int, int, InstanceSeed]] = []
        for position, worker in enumerate(layout.workers):
            if worker_roles is not None and worker.role not in worker_roles:
                continue
            for rank, node in enumerate(worker.nodes):
                if node.name not in placed:
                    continue
                step = f"service_{service}_{worker.role}_{worker.index}_{node.name}"
                seed = InstanceSeed(node=node, step=step, worker=worker, worker_node_rank=rank)
                found.append((node.index, position, rank, seed))
        found.sort(key=lambda t: t[:3])
        return [t[3] for t in found]


BUILTIN_EXPANSIONS: list[type[Expansion]] = [PerNode, PerWorker]
