"""vLLM workers (doc §6 "vllm"): `dynamo.vllm`, data parallel per node, TP across nodes."""

from __future__ import annotations

import json
from typing import Any

from srt_srtctl.backends.common import (
    disaggregation_mode,
    dump_config_path,
    leader_ip,
)
from srt_srtctl.context import BuildContext
from srt_srtctl.environment import EnvBuilder
from srt_srtctl.flags import config_to_flags, lookup
from srt_srtctl.process import ProcessSpec
from srt_srtctl.profiling import nsys_prefix
from srt_srtctl.schema import VLLMBackend
from srt_srtctl.topology import FRONTEND_PUBLIC_PORT, Endpoint, WorkerProcess
from srt_srtctl.workers import per_process_worker

KVBM_CONNECTOR_MODULE = "kvbm.vllm_integration.connector"
DP_DERIVED = (
    "data-parallel-size-local",
    "data-parallel-start-rank",
    "data-parallel-address",
    "data-parallel-rpc-port",
    "data-parallel-hybrid-lb",
)
DIRECT_DERIVED = ("host", "port", "master-addr", "nnodes", "node-rank", "headless")


def _backend(ctx: BuildContext) -> VLLMBackend:
    backend = ctx.config.backend
    assert isinstance(backend, VLLMBackend)
    return backend


def kv_transfer_config(ctx: BuildContext, mode: str) -> str | None:
    mode_cfg = ctx.mode_config(mode)
    connector = mode_cfg["connector"] if "connector" in mode_cfg else _backend(ctx).connector
    if connector is None or connector == "none":
        return None
    known: dict[str, dict[str, Any]] = {
        "nixl": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
        "lmcache": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
        "kvbm": {
            "kv_connector": "DynamoConnector",
            "kv_role": "kv_both",
            "kv_connector_module_path": KVBM_CONNECTOR_MODULE,
        },
    }
    if connector in known:
        return json.dumps(known[connector])
    return str(connector)


def _is_dp(ctx: BuildContext, proc: WorkerProcess) -> bool:
    return proc.dp_local is not None


def worker_argv(ctx: BuildContext, endpoint: Endpoint, proc: WorkerProcess) -> list[str]:
    mode_cfg = ctx.mode_config(proc.mode)
    argv = nsys_prefix(ctx, proc, trtllm=False)
    argv += ["python3", "-m", "dynamo.vllm", "--model", ctx.model_arg]
    argv += ["--served-model-name", ctx.served_model_name]
    argv += disaggregation_mode(proc)
    kv_transfer = kv_transfer_config(ctx, proc.mode)
    if kv_transfer is not None:
        argv += ["--kv-transfer-config", kv_transfer]
    if not _backend(ctx).set_cuda_visible_devices:
        argv += ["--device-ids", ",".join(str(g) for g in proc.gpu_indices)]
    dropped: list[str] = ["connector"]
    multi_node = len(endpoint.nodes) > 1
    if _is_dp(ctx, proc):
        argv += ["--data-parallel-size-local", str(proc.dp_local)]
        argv += ["--data-parallel-start-rank", str(proc.node_rank)]
        argv += ["--data-parallel-address", leader_ip(ctx, proc)]
        argv += ["--data-parallel-rpc-port", str(proc.dp_rpc_port)]
        argv.append("--data-parallel-hybrid-lb")
        dropped += DP_DERIVED
    elif multi_node:
        argv += ["--master-addr", leader_ip(ctx, proc), "--nnodes", str(len(endpoint.nodes))]
        argv += ["--node-rank", str(proc.node_rank)]
        if not proc.is_leader:
            argv.append("--headless")
    argv += ["--request-plane", ctx.config.dynamo.request_plane]
    argv += ["--dump-config-to", dump_config_path(ctx, proc)]
    kv_events = _backend(ctx).kv_events_config
    if isinstance(kv_events, dict):
        kv_events = kv_events.get(proc.mode)
    if kv_events:
        value: dict[str, Any] = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": f"tcp://*:{proc.kv_events_port}",
        }
        if isinstance(kv_events, dict):
            value.update(kv_events)
        argv += ["--kv-events-config", json.dumps(value)]
    if ctx.fidelity.fixed("duplicate-flags"):
        dropped += ["served-model-name", "disaggregation-mode", "model"]
    argv += config_to_flags(mode_cfg, drop=dropped)
    return argv


def direct_argv(ctx: BuildContext, endpoint: Endpoint, proc: WorkerProcess) -> list[str]:
    """Frontend `vllm`: the single aggregated worker serves the public port itself."""
    argv = ["vllm", "serve", ctx.model_arg]
    if proc.is_leader:
        argv += ["--host", "0.0.0.0", "--port", str(FRONTEND_PUBLIC_PORT)]  # noqa: S104
    if len(endpoint.nodes) > 1:
        argv += ["--master-addr", leader_ip(ctx, proc), "--nnodes", str(len(endpoint.nodes))]
        argv += ["--node-rank", str(proc.node_rank)]
        if not proc.is_leader:
            argv.append("--headless")
    dropped = ["connector", *DIRECT_DERIVED]
    if not proc.is_leader:
        dropped.append("api-server-count")
    argv += config_to_flags(ctx.mode_config(proc.mode), drop=dropped)
    return argv


def vllm_env(ctx: BuildContext, endpoint: Endpoint, proc: WorkerProcess, env: EnvBuilder) -> None:
    env.set("DYN_VLLM_KV_EVENT_PORT", str(proc.kv_events_port))
    env.set("VLLM_NIXL_SIDE_CHANNEL_PORT", str(proc.nixl_port))
    env.set("VLLM_NIXL_SIDE_CHANNEL_HOST", ctx.values.ip(proc.node))
    env.set("VLLM_PORT", str(proc.vllm_port))


def dp_warnings(ctx: BuildContext) -> list[str]:
    """srtctl's warning when a recipe sets what per-node DP derives from the topology."""
    found = []
    for endpoint in ctx.topology.endpoints:
        if not any(p.dp_local is not None for p in ctx.topology.processes_of(endpoint)):
            continue
        key = f"vllm_config.{endpoint.mode}.data-parallel-hybrid-lb"
        configured = lookup(ctx.mode_config(endpoint.mode), "data-parallel-hybrid-lb")
        if configured is not None and key not in found:
            found.append(key)
    if not found:
        return []
    return [
        f"WARNING srtctl.backends.vllm: {', '.join(found)} is unnecessary when "
        "dp_launch_mode=per_node; srtslurm derives --data-parallel-hybrid-lb from the topology "
        "and ignores the configured value"
    ]


def build_workers(ctx: BuildContext) -> list[ProcessSpec]:
    specs = []
    direct = ctx.frontend_type == "vllm"
    use_cvd = _backend(ctx).set_cuda_visible_devices
    for endpoint in ctx.topology.endpoints:
        for proc in ctx.topology.processes_of(endpoint):
            argv = (direct_argv if direct else worker_argv)(ctx, endpoint, proc)
            unset = ["VLLM_PORT"] if len(endpoint.nodes) > 1 else []
            specs.append(
                per_process_worker(
                    ctx, endpoint, proc, argv, gpu_env=use_cvd, extra_env=vllm_env, unset=unset
                )
            )
    ctx.warnings.extend(dp_warnings(ctx))
    return specs
