"""srtctl's rules for the workers it builds, for every engine that builds them the same way.

Two engine plugins build srtctl's workers: srt-dynamo (Dynamo's wrappers) and srt-direct (the
engines' own servers). Plugins never import each other, and both must give a worker exactly
what srtctl gives it, so a recipe moved between them, or from srtctl, keeps its ports and
its argv. A second copy of these rules in each plugin would drift the first time srtctl
changes one of them; here there is one copy, which both plugins' tests pin against srtctl.

* :func:`worker_slots`: every worker process's ports, by srtctl's formulas
  (``endpoints_to_processes``) over the whole job in layout order;
* :func:`config_value`: a key of a role's config under either spelling, as srtctl reads it;
* :func:`sglang_server_flags`, :data:`SGLANG_SERVER_FLAGS` and
  :func:`sglang_kv_events_config`: what an sglang server is told about its place in the job,
  whether Dynamo's wrapper or ``sglang.launch_server`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from srt_services.contracts.engine import WorkerProcess

#: a leader's HTTP port steps by this per leader before it on its node
HTTP_STRIDE = 32
#: ``VLLM_PORT`` steps by this per worker process
VLLM_STRIDE = 50

#: flags :func:`sglang_server_flags` and :func:`sglang_kv_events_config` set: an engine drops
#: the recipe's copy from the role's config (and warns about it)
SGLANG_SERVER_FLAGS = frozenset(
    {
        "model-path",
        "served-model-name",
        "nccl-port",
        "disaggregation-mode",
        "disaggregation-bootstrap-port",
        "host",
        "port",
        "dist-init-addr",
        "nnodes",
        "node-rank",
        "kv-events-config",
    }
)


class SlotBases(Protocol):
    """The bases of srtctl's port formulas, as an engine's options hold them (each engine
    documents its own fields; k is a process's position among the job's worker processes)."""

    http: int
    bootstrap: int
    kv_events: int
    nixl: int
    nccl: int
    vllm: int


@dataclass(frozen=True, slots=True)
class WorkerSlots:
    """What srtctl's ``WorkerProcess`` holds beyond the worker itself."""

    process_index: int
    #: sglang/trtllm-serve HTTP port; ``None`` for a follower (it serves none)
    http_port: int | None
    kv_events_port: int
    nixl_port: int
    nccl_port: int
    vllm_port: int
    #: prefill leaders only
    bootstrap_port: int | None
    #: vLLM data parallel per node only
    dp_rpc_port: int | None
    dp_local: int | None
    node_rank: int


#: (data-parallel size, GPUs per replica) of a worker process running one data-parallel
#: process per node, else ``None``
DataParallel = Callable[[WorkerProcess], tuple[int, int] | None]


def _no_data_parallel(proc: WorkerProcess) -> tuple[int, int] | None:
    return None


def host_of(ip: str, name: str) -> str:
    """What shares a port space: a node, except that virtual nodes on the loopback range
    (local mode) are one machine, where a server binding 0.0.0.0 (the prefill bootstrap)
    would collide with its twin on another virtual node."""
    return "loopback" if ip.startswith("127.") else name


def worker_slots(
    processes: Sequence[WorkerProcess],
    bases: SlotBases,
    data_parallel: DataParallel = _no_data_parallel,
    dp_rpc_base: int | None = None,
) -> list[WorkerSlots]:
    """Every process's slots, in ``processes`` order (:func:`worker_processes`).

    The formulas run over every worker process of the job, so the ports of one process
    depend on those before it: build the table once per plan and look processes up by
    ``process_index``. vLLM data parallel launched per node (``data_parallel``, with the
    RPC port's base ``dp_rpc_base``) changes the table: such a process runs several ranks,
    which take several KV-event slots, and serves HTTP on every node.
    """
    out: list[WorkerSlots] = []
    leaders_on: dict[str, int] = {}
    prefill_leaders_on: dict[str, int] = {}
    dp_leaders_on: dict[str, int] = {}
    slot = 0
    endpoint_slot = 0
    bootstrap: int | None = None
    dp_rpc: int | None = None
    for proc in processes:
        worker, node = proc.worker, proc.node
        dp = data_parallel(proc)
        if proc.rank == 0:
            leader = worker.nodes[0]
            host = host_of(leader.ip, leader.name)
            endpoint_slot = slot
            bootstrap = None
            if worker.role == "prefill":
                bootstrap = bases.bootstrap + prefill_leaders_on.get(host, 0)
                prefill_leaders_on[host] = prefill_leaders_on.get(host, 0) + 1
            dp_rpc = None
            if dp is not None:
                if dp_rpc_base is None:
                    raise ValueError("data parallel per node needs dp_rpc_base")
                dp_rpc = dp_rpc_base + dp_leaders_on.get(leader.name, 0)
                dp_leaders_on[leader.name] = dp_leaders_on.get(leader.name, 0) + 1
        http = None
        if proc.rank == 0 or dp is not None:
            http = bases.http + HTTP_STRIDE * leaders_on.get(node.name, 0)
            leaders_on[node.name] = leaders_on.get(node.name, 0) + 1
        local = len(worker.gpus) // dp[1] if dp is not None else None
        k = proc.process_index
        out.append(
            WorkerSlots(
                process_index=k,
                http_port=http,
                kv_events_port=bases.kv_events + slot,
                nixl_port=bases.nixl + (endpoint_slot if dp is not None else slot),
                nccl_port=bases.nccl + k,
                vllm_port=bases.vllm + VLLM_STRIDE * k,
                bootstrap_port=bootstrap,
                dp_rpc_port=dp_rpc,
                dp_local=local,
                node_rank=proc.rank * local if local is not None else proc.rank,
            )
        )
        slot += local if local is not None else 1
    return out


def config_value(config: Mapping[str, Any] | None, key: str) -> Any:
    """A config value under either spelling (``served-model-name`` / ``served_model_name``),
    both of which srtctl accepts; ``None`` when absent."""
    if not config:
        return None
    for candidate in (key, key.replace("-", "_"), key.replace("_", "-")):
        if candidate in config:
            return config[candidate]
    return None


def sglang_server_flags(
    proc: WorkerProcess, slots: WorkerSlots, model: str, served: str, dist_init_port: int
) -> list[str]:
    """What sglang's server is told about its place in the job, in srtctl's order: model,
    served name, address, NCCL port, disaggregation mode and bootstrap port, and for a
    worker across nodes the leader's ``--dist-init-addr`` and this node's rank."""
    worker, role = proc.worker, proc.worker.role
    out = ["--model-path", model, "--served-model-name", served]
    out += ["--host", "0.0.0.0", "--port", str(slots.http_port or 0)]  # noqa: S104
    out += ["--nccl-port", str(slots.nccl_port)]
    if role != "agg":
        out += ["--disaggregation-mode", role]
    if role == "prefill" and slots.bootstrap_port is not None:
        out += ["--disaggregation-bootstrap-port", str(slots.bootstrap_port)]
    if len(worker.nodes) > 1:
        out += ["--dist-init-addr", f"{worker.nodes[0].ip}:{dist_init_port}"]
        out += ["--nnodes", str(len(worker.nodes)), "--node-rank", str(proc.rank)]
    return out


def sglang_kv_events_config(setting: bool | Mapping[str, Any], port: int) -> dict[str, Any] | None:
    """sglang's ``--kv-events-config`` for one mode's ``kv_events`` setting: a ZMQ publisher
    on ``port`` when it is ``true``, with a mapping's keys merged in; ``None`` when off."""
    if not setting:
        return None
    value: dict[str, Any] = {
        "publisher": "zmq",
        "topic": "kv-events",
        "endpoint": f"tcp://*:{port}",
    }
    if isinstance(setting, Mapping):
        value.update(setting)
    return value
