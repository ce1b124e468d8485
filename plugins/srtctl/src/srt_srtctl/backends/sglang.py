"""sglang workers (doc §6 "sglang"): `dynamo.sglang` behind Dynamo, `sglang.launch_server`
behind the sglang router."""

from __future__ import annotations

import json
from typing import Any

from srt_srtctl.backends.common import disaggregation_mode, dist_init_addr, dump_config_path
from srt_srtctl.context import BuildContext
from srt_srtctl.flags import config_to_flags
from srt_srtctl.process import ProcessSpec
from srt_srtctl.profiling import nsys_prefix
from srt_srtctl.schema import SGLangBackend
from srt_srtctl.topology import Endpoint, WorkerProcess
from srt_srtctl.workers import per_process_worker

ALWAYS_DROPPED = ("model-path", "served-model-name", "nccl-port")
SRTCTL_SET = ("disaggregation-mode", "disaggregation-bootstrap-port", "host", "port")


def kv_events_config(ctx: BuildContext, proc: WorkerProcess) -> dict[str, Any] | None:
    backend = ctx.config.backend
    assert isinstance(backend, SGLangBackend)
    setting = backend.kv_events_config
    if isinstance(setting, dict):
        setting = setting.get(proc.mode)
    if not setting:
        return None
    value: dict[str, Any] = {
        "publisher": "zmq",
        "topic": "kv-events",
        "endpoint": f"tcp://*:{proc.kv_events_port}",
    }
    if isinstance(setting, dict):
        value.update(setting)
    return value


def worker_argv(ctx: BuildContext, endpoint: Endpoint, proc: WorkerProcess) -> list[str]:
    dynamo = ctx.frontend_type == "dynamo"
    argv = nsys_prefix(ctx, proc, trtllm=False)
    argv += ["python3", "-m", "dynamo.sglang" if dynamo else "sglang.launch_server"]
    argv += ["--model-path", ctx.model_arg, "--served-model-name", ctx.served_model_name]
    argv += ["--host", "0.0.0.0", "--port", str(proc.http_port)]  # noqa: S104
    argv += ["--nccl-port", str(proc.nccl_port)]
    argv += disaggregation_mode(proc)
    if proc.role == "prefill" and proc.bootstrap_port is not None:
        argv += ["--disaggregation-bootstrap-port", str(proc.bootstrap_port)]
    if len(endpoint.nodes) > 1:
        argv += ["--dist-init-addr", dist_init_addr(ctx, proc)]
        argv += ["--nnodes", str(len(endpoint.nodes)), "--node-rank", str(proc.node_rank)]
    if dynamo:
        argv += ["--dump-config-to", dump_config_path(ctx, proc)]
    kv_events = kv_events_config(ctx, proc)
    if kv_events is not None:
        argv += ["--kv-events-config", json.dumps(kv_events)]
    if dynamo:
        argv += ["--request-plane", ctx.config.dynamo.request_plane]
    dropped: tuple[str, ...] = ALWAYS_DROPPED
    if ctx.fidelity.fixed("duplicate-flags"):
        dropped += SRTCTL_SET
    argv += config_to_flags(ctx.mode_config(proc.mode), drop=dropped)
    return argv


def build_workers(ctx: BuildContext) -> list[ProcessSpec]:
    specs = []
    for endpoint in ctx.topology.endpoints:
        for proc in ctx.topology.processes_of(endpoint):
            argv = worker_argv(ctx, endpoint, proc)
            specs.append(per_process_worker(ctx, endpoint, proc, argv, gpu_env=True))
    return specs
