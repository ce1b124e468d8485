"""Which network a local job's virtual nodes get: the machine's one (``shared``) or a
network namespace each on a private bridge (``namespaces``).

Pure, like the rest of planning: whether the kernel allows namespaces here and which
subnet is free were settled by the application layer and arrive in
:class:`~srt_services.plan.settings.PlanSettings`. ``auto`` takes namespaces only where
they change something: a plan whose wildcard binds collide between virtual nodes (which
shared mode refuses). Every other job, a single-node one above all, keeps the loopback
addresses it always had, so nothing about it changes.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Sequence

from srt_services.contracts.allocation import Allocation
from srt_services.contracts.context import Node
from srt_services.contracts.plan import LocalNetwork, PlannedUnit

MODES: tuple[str, ...] = ("auto", "shared", "namespaces")


def tag(job_dir: str) -> str:
    """Eight hex digits of the job directory: every object the job creates carries them.

    The directory, not the job id: two jobs with one basename in two directories are two
    jobs. Short because a Linux interface name holds at most 15 characters."""
    return hashlib.sha256(job_dir.encode()).hexdigest()[:8]


def choose(requested: str, unavailable: str | None, collisions: Sequence[str]) -> tuple[str, str]:
    """The mode and why. ``unavailable`` says why namespaces cannot be made here
    (``None``: they can); ``collisions`` the services whose wildcard binds collide."""
    if requested == "shared":
        return "shared", "requested"
    if requested == "namespaces":
        return "namespaces", "requested"
    if not collisions:
        return "shared", "auto: no wildcard bind collides between virtual nodes"
    if unavailable is not None:
        return "shared", f"auto: namespaces would separate the nodes, but {unavailable}"
    return (
        "namespaces",
        f"auto: wildcard binds collide between virtual nodes ({', '.join(collisions)})",
    )


def refusal_hint(requested: str, unavailable: str | None) -> str:
    """What the shared-mode refusal adds about namespaces."""
    if requested == "shared":
        return "; or let each virtual node have its own network: --local-network namespaces"
    if unavailable is not None:
        return f"; separate network namespaces per virtual node would too, but {unavailable}"
    return ""


def namespaced(
    allocation: Allocation,
    subnet: str,
    job_dir: str,
    why: str,
) -> tuple[Allocation, LocalNetwork]:
    """The allocation with each virtual node at its bridge address (node *i*: the subnet's
    host *i* + 2; host 1 is the bridge), and the names of what the launcher creates."""
    net = ipaddress.ip_network(subnet)
    hosts = list(net.hosts())
    if len(allocation.nodes) + 1 > len(hosts):
        raise ValueError(f"{subnet} holds too few addresses for {len(allocation.nodes)} nodes")
    t = tag(job_dir)
    nodes = tuple(Node(n.name, str(hosts[n.index + 1]), n.index) for n in allocation.nodes)
    record = LocalNetwork(
        mode="namespaces",
        why=why,
        tag=t,
        owner=job_dir,
        bridge=f"srt-{t}",
        subnet=str(net),
        host_ip=str(hosts[0]),
        namespaces={n.name: f"srt-{t}-{n.name}" for n in nodes},
        addresses={n.name: n.ip for n in nodes},
        veths={n.name: f"srt{t}v{n.index}" for n in nodes},
    )
    return Allocation(allocation.kind, nodes, allocation.job_id), record


def forwards(units: Sequence[PlannedUnit], nodes: Sequence[Node]) -> list[dict[str, object]]:
    """The ports the machine reaches on 127.0.0.1 as in shared mode: the frontend's (the
    user-facing HTTP port ``srt status`` lists), each relayed to its node's address. A
    port two frontend instances share is forwarded to the first."""
    address = {n.name: n.ip for n in nodes}
    out: list[dict[str, object]] = []
    seen: set[int] = set()
    for unit in units:
        if unit.category != "frontend":
            continue
        for inst in unit.instances:
            for port in inst.ports:
                if port in seen:
                    continue
                seen.add(port)
                out.append(
                    {
                        "port": port,
                        "node": inst.node,
                        "address": address[inst.node],
                        "unit": unit.name,
                    }
                )
    return out
