"""``python3 -m dynamo.sglang``: SGLang behind Dynamo's frontend, srtctl's argv."""

from __future__ import annotations

import json
from typing import Any

from srt_services.extend import backend_flags

from srt_dynamo.backends.base import Backend, dropped
from srt_dynamo.build import WorkerBuild
from srt_dynamo.environment import nsys_prefix

MODULE = "dynamo.sglang"
#: srtctl always drops these from the recipe's config; the others it duplicates (srt drops
#: them too, with a warning)
OWNED = frozenset(
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
        "dump-config-to",
        "kv-events-config",
        "request-plane",
    }
)


def kv_events_config(b: WorkerBuild) -> dict[str, Any] | None:
    setting = b.kv_events_setting()
    if not setting:
        return None
    value: dict[str, Any] = {
        "publisher": "zmq",
        "topic": "kv-events",
        "endpoint": f"tcp://*:{b.slots.kv_events_port}",
    }
    if isinstance(setting, dict):
        value.update(setting)
    return value


def server_flags(b: WorkerBuild) -> list[str]:
    """What sglang's server is told about its place in the job, whoever runs it (Dynamo's
    wrapper, or ``sglang.launch_server`` behind the SGLang router)."""
    out = ["--model-path", b.model, "--served-model-name", b.served]
    out += ["--host", "0.0.0.0", "--port", str(b.slots.http_port or 0)]  # noqa: S104
    out += ["--nccl-port", str(b.slots.nccl_port)]
    out += b.disaggregation()
    if b.role == "prefill" and b.slots.bootstrap_port is not None:
        out += ["--disaggregation-bootstrap-port", str(b.slots.bootstrap_port)]
    if b.nnodes > 1:
        out += ["--dist-init-addr", f"{b.leader_ip}:{b.options.ports.dist_init}"]
        out += ["--nnodes", str(b.nnodes), "--node-rank", str(b.proc.rank)]
    return out


def argv(b: WorkerBuild) -> list[str]:
    out = nsys_prefix(b.options, b.mode, b.name, b.gpus, trtllm=False, dynamo=True)
    out += [b.python, "-m", MODULE, *server_flags(b), *b.dump_config()]
    kv_events = kv_events_config(b)
    if kv_events is not None:
        out += ["--kv-events-config", json.dumps(kv_events)]
    out += b.request_plane()
    drop = dropped(OWNED, out, frozenset({"disaggregation-bootstrap-port"}))
    return out + backend_flags(b.config, drop=drop)


BACKEND = Backend(argv=argv, owned=OWNED)
