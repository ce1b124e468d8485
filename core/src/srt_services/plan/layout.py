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


def role_shape(role: str, spec: RoleSpec, gpus_per_node: int, packed: bool = False) -> RoleShape:
    g = spec.gpus_per_worker or gpus_per_node
    if packed and spec.nodes is not None:
        # the recipe's count, whatever the workers need: the packed layout pools it
        return RoleShape(role, spec.nodes, spec.workers, g, max(1, -(-g // gpus_per_node)), 1)
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
    #: the roles' workers laid over their pooled nodes (``resources.layout: packed``)
    packed: bool = False
    spread: bool = False
    colocate: bool = False
    gpus_per_node: int = 8

    @property
    def engine_nodes(self) -> int:
        if self.packed and self.colocate:
            gpus = sum(r.workers * r.gpus_per_worker for r in self.roles)
            return max(1, -(-gpus // self.gpus_per_node)) if self.roles else 0
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


#: The order the packed layout lays roles out in (srtctl's).
PACKED_ORDER = ("prefill", "decode", "agg")


def needs_of(recipe: Recipe, dedicated_infra: bool, pools: list[tuple[str, int]]) -> NodeNeeds:
    res = recipe.resources
    gpn = res.gpus_per_node
    packed = res.layout == "packed"
    shapes = {name: role_shape(name, spec, gpn, packed) for name, spec in recipe.roles.items()}
    if packed:
        shapes = {name: shapes[name] for name in PACKED_ORDER if name in shapes}
    return NodeNeeds(
        dedicated_infra=dedicated_infra,
        dedicated_client=recipe.benchmark.dedicated_node,
        roles=tuple(shapes.values()),
        pools=tuple(pools),
        packed=packed,
        spread=res.spread_workers,
        colocate=res.colocate,
        gpus_per_node=gpn,
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
    if needs.packed:
        cursor = needs.engine_nodes
        workers = packed_workers(rest[:cursor], needs, ports)
        role_nodes = {
            shape.role: tuple(
                {n.name: n for w in workers if w.role == shape.role for n in w.nodes}.values()
            )
            for shape in needs.roles
        }
    else:
        cursor, role_nodes, workers = _per_role(rest, needs, gpus_per_node, ports)
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


def _per_role(
    rest: list[Node], needs: NodeNeeds, gpus_per_node: int, ports: dict[str, int | None]
) -> tuple[int, dict[str, tuple[Node, ...]], list[Worker]]:
    """Each role on nodes of its own, in the recipe's role order (``layout: roles``):
    (nodes used, each role's nodes, the workers)."""
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
    return cursor, role_nodes, workers


def packed_workers(
    nodes: list[Node], needs: NodeNeeds, ports: dict[str, int | None]
) -> list[Worker]:
    """srtctl's placement (its ``allocate_endpoints``): the roles in the order prefill,
    decode, agg over the pooled worker nodes. A worker of a node's GPUs or more takes
    ``ceil(g / gpus_per_node)`` whole nodes (all their GPUs); a narrower one takes the next
    free GPUs of the current node, or the next node when they do not fit (``spread``: a
    node of its own). Decode starts on a fresh node when prefill left one partly used and
    another node is left, unless prefill and decode are colocated. Running out of nodes
    is :class:`AllocationTooSmall`, naming the worker that does not fit."""
    gpn = needs.gpus_per_node
    at, offset = 0, 0
    out: list[Worker] = []

    def node(i: int, what: str) -> Node:
        if i >= len(nodes):
            raise AllocationTooSmall(
                f"{what} does not fit: the workers need more than the {len(nodes)} worker"
                " node(s) the roles' `nodes` give (resources.layout: packed)"
            )
        return nodes[i]

    for shape in needs.roles:
        if shape.role == "decode" and offset > 0 and at + 1 < len(nodes) and not needs.colocate:
            at, offset = at + 1, 0
        g = shape.gpus_per_worker
        base = ports.get(shape.role)
        for k in range(shape.workers):
            what = f"worker {shape.role}_{k}"
            if g >= gpn:
                if offset > 0:
                    at, offset = at + 1, 0
                span = -(-g // gpn)
                wnodes = tuple(node(at + i, what) for i in range(span))
                at += span
                out.append(Worker(shape.role, k, wnodes, tuple(range(gpn)), 0, base, gpn))
                continue
            if offset + g > gpn or (needs.spread and offset > 0):
                at, offset = at + 1, 0
            slot = offset // g
            placed = node(at, what)
            gpus = tuple(range(offset, offset + g))
            port = base + slot if base is not None else None
            out.append(Worker(shape.role, k, (placed,), gpus, slot, port, gpn))
            offset += g
            if offset >= gpn:
                at, offset = at + 1, 0
    return out


def idle_gpus(layout_nodes: tuple[Node, ...], workers: tuple[Worker, ...], gpn: int) -> list[str]:
    """``node: gpus a-b`` for every worker node with GPUs no worker uses (the packed layout
    keeps the roles' node counts, as srtctl does, whatever the workers need)."""
    used: dict[str, set[int]] = {n.name: set() for n in layout_nodes}
    for w in workers:
        for n in w.nodes:
            used.setdefault(n.name, set()).update(w.gpus)
    out = []
    for name, taken in used.items():
        idle = [g for g in range(gpn) if g not in taken]
        if idle:
            out.append(f"{name}: GPU {','.join(map(str, idle))}" if taken else f"{name}: all GPUs")
    return out
