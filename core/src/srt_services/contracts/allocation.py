"""Allocations: the nodes a plan is resolved against.

* ``local``: virtual nodes on this machine, node *i* on loopback address 127.0.0.(i+1), so
  services that bind ``{node_ip}`` on different virtual nodes never clash.
* ``symbolic``: named nodes with placeholder addresses, for dry runs (``--nodes N`` or
  ``--nodelist a,b,c``); nothing is looked up.
* ``slurm``: the nodes of the current allocation with their resolved addresses (built by the
  Slurm launcher, which alone may run ``scontrol``/``srun``).
"""

from __future__ import annotations

from dataclasses import dataclass

from srt_services.contracts.context import Node

MAX_LOCAL_NODES = 254


@dataclass(frozen=True, slots=True)
class Allocation:
    kind: str
    nodes: tuple[Node, ...]
    job_id: str = "local"


@dataclass(frozen=True, slots=True)
class AllocationRequest:
    """What the user asked for; the node count may wait for the recipe (``None``)."""

    kind: str = "symbolic"
    count: int | None = None
    nodelist: tuple[str, ...] | None = None
    job_id: str = "dry-run"
    #: Where a launcher may cache what it learns about the allocation (node addresses).
    job_dir: str | None = None

    def build(self, needed: int) -> Allocation:
        if self.kind == "local":
            return local(self.count or needed, self.job_id)
        names = self.nodelist or tuple(f"node{i}" for i in range(self.count or needed))
        return Allocation(
            "symbolic", tuple(Node(n, f"<{n}-ip>", i) for i, n in enumerate(names)), self.job_id
        )


def local(count: int, job_id: str = "local") -> Allocation:
    if not 1 <= count <= MAX_LOCAL_NODES:
        raise ValueError(f"--nodes must be between 1 and {MAX_LOCAL_NODES} on this machine")
    return Allocation(
        "local", tuple(Node(f"node{i}", f"127.0.0.{i + 1}", i) for i in range(count)), job_id
    )
