"""Node carving: which node is the head, the infra node, the client, which nodes each role's
workers and each pool own, and where every worker's GPUs are.

Order of the allocation: a dedicated infra node first (if any service asks for one), then
the engine roles' nodes in the recipe's role order, then every pool in declaration order,
and a dedicated benchmark client last (never the first node, where Slurm runs the batch
script).
"""

from __future__ import annotations

from dataclasses import dataclass

from srt_services.contracts.context import Layout, Node, Worker
from srt_services.recipe.models import Recipe, RoleSpec


@dataclass(frozen=True, slots=True)
class RoleShape:
    role: str
    nodes: int
    workers: int
    gpus_per_worker: int
    span: int  # nodes per worker (1 unless a worker is wider than a node)
    per_node: int  # workers per node (when span == 1)


def role_shape(role: str, spec: RoleSpec, gpus_per_node: int) -> RoleShape:
    g = spec.gpus_per_worker or gpus_per_node
    if g > gpus_per_node:
        span = max(1, g // gpus_per_node)
        return RoleShape(role, spec.workers * span, spec.workers, g, span, 1)
    fit = max(1, gpus_per_node // g)
    nodes = spec.nodes or -(-spec.workers // fit)
    per_node = -(-spec.workers // nodes)
    return RoleShape(role, nodes, spec.workers, g, 1, per_node)


@dataclass(frozen=True, slots=True)
class NodeNeeds:
    """What a recipe asks of the allocation."""

    dedicated_infra: bool
    dedicated_client: bool
    roles: tuple[RoleShape, ...]
    pools: tuple[tuple[str, int], ...]

    @property
    def engine_nodes(self) -> int:
        return sum(r.nodes for r in self.roles)

    @property
    def total(self) -> int:
        n = self.engine_nodes + sum(c for _, c in self.pools)
        n += int(self.dedicated_infra) + int(self.dedicated_client)
        return max(1, n)

    def describe(self) -> str:
        parts = [f"{r.nodes} for {r.role}" for r in self.roles]
        parts += [f"{c} for pool {name}" for name, c in self.pools]
        if self.dedicated_infra:
            parts.append("1 dedicated infra node")
        if self.dedicated_client:
            parts.append("1 dedicated benchmark node")
        if len(parts) > _DESCRIBED:  # a recipe of 100,000 pools: the first few, and a count
            parts = [*parts[:_DESCRIBED], f"and {len(parts) - _DESCRIBED} more"]
        return ", ".join(parts) or "1 node"


#: Parts of a node count spelled out in a message.
_DESCRIBED = 10


def needs_of(recipe: Recipe, dedicated_infra: bool, pools: list[tuple[str, int]]) -> NodeNeeds:
    gpn = recipe.resources.gpus_per_node
    roles = tuple(role_shape(name, spec, gpn) for name, spec in recipe.roles.items())
    return NodeNeeds(
        dedicated_infra=dedicated_infra,
        dedicated_client=recipe.benchmark.dedicated_node,
        roles=roles,
        pools=tuple(pools),
    )


class AllocationTooSmall(ValueError):
    pass


def carve(
    nodes: list[Node], needs: NodeNeeds, gpus_per_node: int, ports: dict[str, int | None]
) -> Layout:
    """Split ``nodes`` (allocation order) into the job's roles; ``ports`` is each role's base port."""
    if len(nodes) < needs.total:
        raise AllocationTooSmall(
            f"the allocation has {len(nodes)} node(s) but the recipe needs {needs.total}:"
            f" {needs.describe()}"
        )
    front = 1 if needs.dedicated_infra else 0
    tail = 1 if needs.dedicated_client else 0
    rest = nodes[front : len(nodes) - tail]
    cursor = 0
    role_nodes: dict[str, tuple[Node, ...]] = {}
    workers: list[Worker] = []
    for shape in needs.roles:
        mine = tuple(rest[cursor : cursor + shape.nodes])
        cursor += shape.nodes
        role_nodes[shape.role] = mine
        base = ports.get(shape.role)
        for k in range(shape.workers):
            if shape.span > 1:
                wnodes = mine[k * shape.span : (k + 1) * shape.span]
                gpus: tuple[int, ...] = tuple(range(gpus_per_node))
                slot = 0
            else:
                wnodes = (mine[k // shape.per_node],)
                slot = k % shape.per_node
                g = shape.gpus_per_worker
                gpus = tuple(range(slot * g, slot * g + g))
            workers.append(
                Worker(
                    role=shape.role,
                    index=k,
                    nodes=wnodes,
                    gpus=gpus,
                    slot=slot,
                    port=base + slot if base is not None else None,
                    gpus_per_node=gpus_per_node,
                )
            )
    worker_nodes = tuple(rest[:cursor])
    pools: dict[str, tuple[Node, ...]] = {}
    for name, count in needs.pools:
        pools[name] = tuple(rest[cursor : cursor + count])
        cursor += count
    if worker_nodes:
        head = worker_nodes[0]
    elif pools:
        head = next(iter(pools.values()))[0]
    elif rest:
        head = rest[0]
    else:
        head = nodes[0]
    infra = nodes[0] if needs.dedicated_infra else head
    client = nodes[-1] if needs.dedicated_client else head
    return Layout(
        nodes=tuple(nodes),
        head=head,
        infra=infra,
        client=client,
        dedicated_infra=needs.dedicated_infra,
        dedicated_client=needs.dedicated_client,
        worker_nodes=worker_nodes,
        role_nodes=role_nodes,
        workers=tuple(workers),
        pools=pools,
        gpus_per_node=gpus_per_node,
    )
