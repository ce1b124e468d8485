"""``python3 -m dynamo.vllm``: vLLM behind Dynamo's frontend, srtctl's argv and ports."""

from __future__ import annotations

import json
from typing import Any

from srt_services.extend import backend_flags, config_value

from srt_dynamo.backends.base import Backend, dropped
from srt_dynamo.build import WorkerBuild
from srt_dynamo.environment import nsys_prefix

MODULE = "dynamo.vllm"
KVBM_CONNECTOR_MODULE = "kvbm.vllm_integration.connector"
#: what ``connector`` names, as ``--kv-transfer-config``
KNOWN_CONNECTORS: dict[str, dict[str, Any]] = {
    "nixl": {"kv_connector": "NixlConnector", "kv_role": "kv_both"},
    "lmcache": {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"},
    "kvbm": {
        "kv_connector": "DynamoConnector",
        "kv_role": "kv_both",
        "kv_connector_module_path": KVBM_CONNECTOR_MODULE,
    },
}
DP_DERIVED = (
    "data-parallel-size-local",
    "data-parallel-start-rank",
    "data-parallel-address",
    "data-parallel-rpc-port",
    "data-parallel-hybrid-lb",
)
MULTI_NODE = ("master-addr", "nnodes", "node-rank", "headless")
OWNED = frozenset(
    {
        "model",
        "served-model-name",
        "disaggregation-mode",
        "kv-transfer-config",
        "device-ids",
        "request-plane",
        "dump-config-to",
        "kv-events-config",
        *DP_DERIVED,
        *MULTI_NODE,
    }
)
#: ``connector`` in a role's config picks the connector; it is not a vLLM flag
SPECIAL = frozenset({"connector"})


def connector(b: WorkerBuild) -> str | None:
    """The role's config ``connector``, else the recipe's (role, then engine), else the
    engine option (srtctl's ``backend.connector``, default nixl)."""
    config = b.config
    if "connector" in config:
        found = config["connector"]
        return None if found in (None, "none") else str(found)
    written = b.recipe.role_connector(b.role)
    spec = b.recipe.roles.get(b.role)  # type: ignore[call-overload]
    if written is not None or (spec is not None and spec.connector == "none"):
        return written
    if b.recipe.engine.connector == "none":
        return None
    chosen = b.options.connector
    return None if chosen in (None, "none") else chosen


def kv_transfer_config(b: WorkerBuild) -> str | None:
    chosen = connector(b)
    if chosen is None:
        return None
    if chosen in KNOWN_CONNECTORS:
        return json.dumps(KNOWN_CONNECTORS[chosen])
    return chosen


def parallel_flags(b: WorkerBuild) -> list[str]:
    """Data parallel per node, or TP/PP across nodes (srtctl's rules)."""
    s = b.slots
    out: list[str] = []
    if s.dp_local is not None:
        out += ["--data-parallel-size-local", str(s.dp_local)]
        out += ["--data-parallel-start-rank", str(s.node_rank)]
        out += ["--data-parallel-address", b.leader_ip]
        out += ["--data-parallel-rpc-port", str(s.dp_rpc_port)]
        out.append("--data-parallel-hybrid-lb")
    elif b.nnodes > 1:
        out += ["--master-addr", b.leader_ip, "--nnodes", str(b.nnodes)]
        out += ["--node-rank", str(b.proc.rank)]
        if not b.proc.leader:
            out.append("--headless")
    return out


def argv(b: WorkerBuild) -> list[str]:
    out = nsys_prefix(b.options, b.mode, b.name, b.gpus, trtllm=False, dynamo=True)
    out += [b.python, "-m", MODULE, "--model", b.model, "--served-model-name", b.served]
    out += b.disaggregation()
    transfer = kv_transfer_config(b)
    if transfer is not None:
        out += ["--kv-transfer-config", transfer]
    if not b.options.set_cuda_visible_devices:
        out += ["--device-ids", b.gpus]
    out += parallel_flags(b)
    out += b.request_plane()
    out += b.dump_config()
    setting = b.kv_events_setting()
    if setting:
        value: dict[str, Any] = {
            "enable_kv_cache_events": True,
            "publisher": "zmq",
            "endpoint": f"tcp://*:{b.slots.kv_events_port}",
        }
        if isinstance(setting, dict):
            value.update(setting)
        out += ["--kv-events-config", json.dumps(value)]
    drop = dropped(OWNED, out, frozenset({"kv-transfer-config"}))
    return out + backend_flags(b.config, drop=drop | SPECIAL)


def forced_env(b: WorkerBuild) -> dict[str, str]:
    """The ports srtctl gives every vLLM worker, over the recipe's env (as srtctl does)."""
    s = b.slots
    env = {
        "DYN_VLLM_KV_EVENT_PORT": str(s.kv_events_port),
        "VLLM_NIXL_SIDE_CHANNEL_PORT": str(s.nixl_port),
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "{node_ip}",
    }
    # srtctl exports VLLM_PORT, then unsets it for a worker spanning nodes (torch's
    # rendezvous would otherwise take it): srt leaves it out there
    if b.nnodes == 1:
        env["VLLM_PORT"] = str(s.vllm_port)
    return env


def uses_data_parallel_hybrid_lb(config: dict[str, Any]) -> bool:
    return config_value(config, "data-parallel-hybrid-lb") is not None


BACKEND = Backend(
    argv=argv,
    owned=OWNED,
    forced_env=forced_env,
    visible_devices=lambda b: b.options.set_cuda_visible_devices,
    special=SPECIAL,
)
