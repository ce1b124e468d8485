"""Where everything runs: node count, node roles, worker placement, ports (doc §4, §7).

These rules decide which GPUs a worker gets and which ports it listens on; a difference from
srtctl here silently changes performance results or breaks the KV transfer between workers, so
each rule follows srtctl's, including its oddities (idle GPUs, a whole node for a wide worker).
Inputs are the resolved config and the allocated node names; outputs are plain dataclasses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from srt_srtctl.schema import SrtConfig, VLLMBackend

ROLES = ("prefill", "decode", "agg")
MODE_OF_ROLE = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}

SYS_PORT_BASE = 7500
HTTP_PORT_BASE = 6100
HTTP_PORT_STRIDE = 32
BOOTSTRAP_PORT_BASE = 7200
KV_EVENTS_PORT_BASE = 5200
NIXL_PORT_BASE = 5400
NCCL_PORT_BASE = 17500
DIST_INIT_PORT = 8300
VLLM_PORT_BASE = 20000
VLLM_PORT_STRIDE = 50
DP_RPC_PORT_BASE = 8400
FRONTEND_PUBLIC_PORT = 8000
FRONTEND_INTERNAL_PORT = 8180
ETCD_PORT = 2379
NATS_PORT = 4222
MOONCAKE_RPC_PORT = 8700
MOONCAKE_HTTP_PORT = 8701
MOONCAKE_METRICS_PORT = 8702
KVBM_PORT_BASE = 5600


class TopologyError(ValueError):
    """The allocation cannot hold the workers (srtctl: IndexError / "Not enough nodes")."""


@dataclass(frozen=True)
class NodeRoles:
    all_nodes: list[str]
    head: str
    infra: str
    bench: str
    workers: list[str]
    frontend_reserved: str | None = None
    client_reserved: str | None = None


@dataclass
class Endpoint:
    role: str
    index: int
    nodes: list[str]
    gpu_indices: list[int]
    gpus_per_node: int

    @property
    def mode(self) -> str:
        return MODE_OF_ROLE[self.role]


@dataclass
class WorkerProcess:
    role: str
    index: int
    node: str
    node_rank: int
    gpu_indices: list[int]
    is_leader: bool
    sys_port: int
    http_port: int
    kv_events_port: int
    nixl_port: int
    bootstrap_port: int | None = None
    dp_rpc_port: int | None = None
    dp_local: int | None = None
    """vLLM data parallel: ranks this process runs (`--data-parallel-size-local`)."""
    endpoint_nodes: list[str] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return MODE_OF_ROLE[self.role]

    @property
    def nccl_port(self) -> int:
        return NCCL_PORT_BASE + (self.sys_port - SYS_PORT_BASE)

    @property
    def vllm_port(self) -> int:
        return VLLM_PORT_BASE + VLLM_PORT_STRIDE * (self.sys_port - SYS_PORT_BASE)

    @property
    def kvbm_pub_port(self) -> int:
        return KVBM_PORT_BASE + 2 * (self.kv_events_port - KV_EVENTS_PORT_BASE)


@dataclass(frozen=True)
class FrontendTopology:
    """Single frontend on `public` port, or nginx on head in front of routers on 8180."""

    frontend_nodes: list[str]
    frontend_port: int
    nginx_node: str | None
    public_port: int = FRONTEND_PUBLIC_PORT

    @property
    def public_node(self) -> str:
        return self.nginx_node or self.frontend_nodes[0]


@dataclass
class Topology:
    roles: NodeRoles
    endpoints: list[Endpoint]
    processes: list[WorkerProcess]
    frontend: FrontendTopology

    def processes_of(self, endpoint: Endpoint) -> list[WorkerProcess]:
        return [p for p in self.processes if p.role == endpoint.role and p.index == endpoint.index]


# --- counts -----------------------------------------------------------------------------------


def worker_counts(config: SrtConfig) -> dict[str, int]:
    r = config.resources
    return {"prefill": r.num_prefill, "decode": r.num_decode, "agg": r.num_agg}


def gpus_per_worker(config: SrtConfig) -> dict[str, int]:
    r = config.resources
    return {"prefill": r.prefill_gpus, "decode": r.decode_gpus, "agg": r.agg_gpus}


def _colocates_pd(config: SrtConfig) -> bool:
    b = config.backend
    return isinstance(b, VLLMBackend) and (
        b.allow_prefill_decode_colocation or b.allow_prefill_decode_colocation_across_nodes
    )


def _dedicated_roles(config: SrtConfig) -> list[str]:
    roles = []
    if config.infra.etcd_nats_dedicated_node:
        roles.append("infra")
    if config.frontend.dedicated_node:
        roles.append("frontend")
    if config.benchmark.client_dedicated_node:
        roles.append("client")
    return roles


def worker_node_count(config: SrtConfig) -> int:
    r = config.resources
    if _colocates_pd(config):
        counts, gpus = worker_counts(config), gpus_per_worker(config)
        total = sum(counts[role] * gpus[role] for role in ROLES)
        return max(1, math.ceil(total / r.gpus_per_node))
    if r.is_disaggregated:
        return (r.prefill_nodes or 0) + (r.decode_nodes or 0)
    return r.agg_nodes if r.agg_nodes is not None else 1


def total_node_count(config: SrtConfig) -> int:
    """sbatch `--nodes` (doc §4): never derived from workers x GPUs."""
    dedicated = _dedicated_roles(config)
    extra = 0
    if dedicated:
        extra = 1 if config.benchmark.colocate_with_frontend else len(dedicated)
    return worker_node_count(config) + extra


# --- node roles --------------------------------------------------------------------------------


def node_roles(config: SrtConfig, nodes: list[str]) -> NodeRoles:
    dedicated = _dedicated_roles(config)
    reserved: dict[str, str] = {}
    if dedicated and config.benchmark.colocate_with_frontend:
        shared = nodes[-1] if "client" in dedicated else nodes[0]
        reserved = dict.fromkeys(dedicated, shared)
    elif dedicated:
        front = 0
        for role in ("infra", "frontend"):
            if role in dedicated:
                reserved[role] = nodes[front]
                front += 1
        if "client" in dedicated:
            reserved["client"] = nodes[-1]
    taken = set(reserved.values())
    workers = [n for n in nodes if n not in taken]
    if not workers:
        raise TopologyError("Not enough nodes: no node left for workers")
    head = reserved.get("frontend", workers[0])
    bench = reserved.get("client", head)
    infra = reserved.get("infra", head)
    return NodeRoles(
        all_nodes=list(nodes),
        head=head,
        infra=infra,
        bench=bench,
        workers=workers,
        frontend_reserved=reserved.get("frontend"),
        client_reserved=reserved.get("client"),
    )


# --- placement ---------------------------------------------------------------------------------


class _Placer:
    """A cursor over the worker nodes: current node and the next free GPU on it."""

    def __init__(self, workers: list[str], gpn: int) -> None:
        self.workers, self.gpn = workers, gpn
        self.node_idx, self.offset = 0, 0

    def node_at(self, i: int) -> str:
        if i >= len(self.workers):
            raise TopologyError(
                f"Not enough nodes: worker placement needs node #{i + 1}, "
                f"the allocation has {len(self.workers)} worker node(s)"
            )
        return self.workers[i]

    def next_node(self) -> None:
        self.node_idx, self.offset = self.node_idx + 1, 0

    def whole_nodes(self, gpus: int) -> tuple[list[str], list[int]]:
        """A wide worker takes ceil(gpus / gpn) whole nodes and all their GPUs."""
        if self.offset > 0:
            self.next_node()
        span = math.ceil(gpus / self.gpn)
        placed = [self.node_at(self.node_idx + k) for k in range(span)]
        self.node_idx += span
        return placed, list(range(self.gpn))

    def packed(self, gpus: int, spread: bool) -> tuple[list[str], list[int]]:
        """A narrow worker packs at the next free GPU offset, or moves to the next node."""
        if self.offset + gpus > self.gpn or (spread and self.offset > 0):
            self.next_node()
        placed = [self.node_at(self.node_idx)], list(range(self.offset, self.offset + gpus))
        self.offset += gpus
        if self.offset >= self.gpn:
            self.next_node()
        return placed


def allocate_endpoints(config: SrtConfig, workers: list[str]) -> list[Endpoint]:
    """Place prefill, then decode, then agg workers over the worker nodes (doc §4)."""
    gpn = config.resources.gpus_per_node
    counts, gpus = worker_counts(config), gpus_per_worker(config)
    spread = config.resources.spread_workers
    placer = _Placer(workers, gpn)
    endpoints: list[Endpoint] = []
    for role in ROLES:
        if counts[role] == 0:
            continue
        fresh_decode = placer.offset > 0 and placer.node_idx + 1 < len(workers)
        if role == "decode" and fresh_decode and not _colocates_pd(config):
            placer.next_node()
        g = gpus[role]
        for index in range(counts[role]):
            if g >= gpn:
                nodes, gpu_ids = placer.whole_nodes(g)
                endpoints.append(Endpoint(role, index, nodes, gpu_ids, gpn))
            else:
                nodes, gpu_ids = placer.packed(g, spread)
                endpoints.append(Endpoint(role, index, nodes, gpu_ids, g))
    return endpoints


def _mode_config(config: SrtConfig, mode: str) -> dict[str, Any]:
    backend = config.backend
    section = getattr(backend, f"{backend.type}_config", None)
    if section is None:
        return {}
    return dict(getattr(section, mode) or {})


def vllm_data_parallel(config: SrtConfig, endpoint: Endpoint) -> tuple[int, int] | None:
    """(dp size, GPUs per replica) when a vLLM endpoint runs one DP process per node."""
    backend = config.backend
    if not isinstance(backend, VLLMBackend) or backend.dp_launch_mode != "per_node":
        return None
    mode_cfg = _mode_config(config, endpoint.mode)
    dp = _flag(mode_cfg, "data-parallel-size")
    if dp is None or int(dp) < 1:
        return None
    tp = int(_flag(mode_cfg, "tensor-parallel-size") or 1)
    pp = int(_flag(mode_cfg, "pipeline-parallel-size") or 1)
    replica = tp * pp
    if replica > endpoint.gpus_per_node:
        return None
    return int(dp), replica


def _flag(cfg: dict[str, Any], name: str) -> Any:
    return cfg.get(name, cfg.get(name.replace("-", "_")))


def endpoints_to_processes(config: SrtConfig, endpoints: list[Endpoint]) -> list[WorkerProcess]:
    """One process per endpoint node; the first node leads (doc §4 port table)."""
    processes: list[WorkerProcess] = []
    leaders_on: dict[str, int] = {}
    prefill_leaders_on: dict[str, int] = {}
    dp_leaders_on: dict[str, int] = {}
    slot = 0  # kv-events / nixl slot: vLLM DP processes take one per local rank
    for ep in endpoints:
        dp = vllm_data_parallel(config, ep)
        leader = ep.nodes[0]
        bootstrap = None
        if ep.role == "prefill":
            bootstrap = BOOTSTRAP_PORT_BASE + prefill_leaders_on.get(leader, 0)
            prefill_leaders_on[leader] = prefill_leaders_on.get(leader, 0) + 1
        dp_rpc = None
        if dp is not None:
            dp_rpc = DP_RPC_PORT_BASE + dp_leaders_on.get(leader, 0)
            dp_leaders_on[leader] = dp_leaders_on.get(leader, 0) + 1
        endpoint_slot = slot
        for rank, node in enumerate(ep.nodes):
            is_leader = rank == 0
            serves_http = is_leader or dp is not None
            http = 0
            if serves_http:
                http = HTTP_PORT_BASE + HTTP_PORT_STRIDE * leaders_on.get(node, 0)
                leaders_on[node] = leaders_on.get(node, 0) + 1
            local = len(ep.gpu_indices) // dp[1] if dp is not None else None
            proc = WorkerProcess(
                role=ep.role,
                index=ep.index,
                node=node,
                node_rank=rank * local if local is not None else rank,
                gpu_indices=list(ep.gpu_indices),
                is_leader=is_leader,
                sys_port=SYS_PORT_BASE + len(processes),
                http_port=http,
                kv_events_port=KV_EVENTS_PORT_BASE + slot,
                nixl_port=NIXL_PORT_BASE + (endpoint_slot if dp is not None else slot),
                bootstrap_port=bootstrap,
                dp_rpc_port=dp_rpc,
                dp_local=local,
                endpoint_nodes=list(ep.nodes),
            )
            processes.append(proc)
            slot += local if local is not None else 1
    return processes


# --- frontend ----------------------------------------------------------------------------------


def frontend_topology(config: SrtConfig, roles: NodeRoles) -> FrontendTopology:
    fe = config.frontend
    workers = roles.workers
    head = roles.head
    if not fe.enable_multiple_frontends or len(workers) == 1:
        return FrontendTopology([head], FRONTEND_PUBLIC_PORT, None)
    others = [n for n in workers if n != head]
    count = min(fe.num_additional_frontends + 1, len(workers) - 1)
    return FrontendTopology(others[:count], FRONTEND_INTERNAL_PORT, head)


def build_topology(config: SrtConfig, nodes: list[str]) -> Topology:
    roles = node_roles(config, nodes)
    endpoints = allocate_endpoints(config, roles.workers)
    processes = endpoints_to_processes(config, endpoints)
    return Topology(roles, endpoints, processes, frontend_topology(config, roles))
