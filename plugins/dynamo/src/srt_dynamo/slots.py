"""Each worker process's ports and ranks, by srtctl's formulas (its ``endpoints_to_processes``).

The formulas run over every worker process of the job in layout order, so the ports of one
process depend on those before it: a table is built once per plan and looked up per
process. vLLM data parallel launched per node changes the table (a process runs several
ranks, which take several KV-event slots and serve HTTP on every node), which is why this is
not a plain function of the process's position.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srt_services.extend import Recipe, WorkerProcess

from srt_dynamo.options import MODE_OF_ROLE, PortBases

HTTP_STRIDE = 32
VLLM_STRIDE = 50


@dataclass(frozen=True, slots=True)
class Slots:
    """What srtctl's ``WorkerProcess`` holds beyond the worker itself."""

    process_index: int
    sys_port: int
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


def lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    """A config value under either spelling (``served-model-name`` / ``served_model_name``)."""
    if not config:
        return None
    for candidate in (key, key.replace("-", "_"), key.replace("_", "-")):
        if candidate in config:
            return config[candidate]
    return None


def vllm_data_parallel(
    recipe: Recipe, role: str, dp_launch_mode: str, gpus: int, gpus_per_node: int
) -> tuple[int, int] | None:
    """(dp size, GPUs per replica) when a vLLM worker runs one DP process per node."""
    if recipe.engine.type != "vllm" or dp_launch_mode != "per_node":
        return None
    config = recipe.roles[role].config if role in recipe.roles else {}
    dp = lookup(config, "data-parallel-size")
    if dp is None or int(dp) < 1:
        return None
    replica = int(lookup(config, "tensor-parallel-size") or 1) * int(
        lookup(config, "pipeline-parallel-size") or 1
    )
    if replica > min(gpus, gpus_per_node):
        return None
    return int(dp), replica


def host_of(ip: str, name: str) -> str:
    """What shares a port space: a node, except that virtual nodes on the loopback range
    (local mode) are one machine, where a server binding 0.0.0.0 (the prefill bootstrap)
    would collide with its twin on another virtual node."""
    return "loopback" if ip.startswith("127.") else name


def slot_table(
    recipe: Recipe, processes: Sequence[WorkerProcess], bases: PortBases, dp_launch_mode: str
) -> list[Slots]:
    """Every process's slots, in ``processes`` order."""
    out: list[Slots] = []
    leaders_on: dict[str, int] = {}
    prefill_leaders_on: dict[str, int] = {}
    dp_leaders_on: dict[str, int] = {}
    slot = 0
    endpoint_slot = 0
    bootstrap: int | None = None
    dp_rpc: int | None = None
    for proc in processes:
        worker, node = proc.worker, proc.node
        dp = vllm_data_parallel(
            recipe, worker.role, dp_launch_mode, len(worker.gpus), worker.gpus_per_node
        )
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
                dp_rpc = bases.dp_rpc + dp_leaders_on.get(leader.name, 0)
                dp_leaders_on[leader.name] = dp_leaders_on.get(leader.name, 0) + 1
        http = None
        if proc.rank == 0 or dp is not None:
            http = bases.http + HTTP_STRIDE * leaders_on.get(node.name, 0)
            leaders_on[node.name] = leaders_on.get(node.name, 0) + 1
        local = len(worker.gpus) // dp[1] if dp is not None else None
        k = proc.process_index
        out.append(
            Slots(
                process_index=k,
                sys_port=bases.system + k,
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


def mode_of(role: str) -> str:
    return MODE_OF_ROLE[role]
