"""TensorRT-LLM workers (doc §6 "trtllm"): one MPI srun per endpoint, engine config as YAML."""

from __future__ import annotations

from typing import Any

import yaml

from srt_srtctl.backends.common import disaggregation_mode
from srt_srtctl.context import BuildContext
from srt_srtctl.preamble import worker_preamble
from srt_srtctl.process import ProcessSpec, SrunSpec, WorkerRecord
from srt_srtctl.profiling import nsys_prefix, profiling_worker_env
from srt_srtctl.schema import TRTLLMBackend
from srt_srtctl.topology import FRONTEND_PUBLIC_PORT, Endpoint, WorkerProcess
from srt_srtctl.workers import SHORT_MODE, add_recipe_env, add_top_level_env, base_worker_env

NUMA_GPU_TYPES = ("gb200", "gb300")
PARALLEL_KEYS = ("tensor_parallel_size", "moe_expert_parallel_size", "pipeline_parallel_size")


def _backend(ctx: BuildContext) -> TRTLLMBackend:
    backend = ctx.config.backend
    assert isinstance(backend, TRTLLMBackend)
    return backend


def engine_config(ctx: BuildContext, mode: str) -> dict[str, Any]:
    cfg = ctx.mode_config(mode)
    if ctx.config.observability.enabled:
        # observability.enabled expands into the engine dicts at load time (doc §13)
        cfg.setdefault("enable_iter_perf_stats", True)
        cfg.setdefault("return_perf_metrics", True)
    return cfg


def engine_yaml(ctx: BuildContext, mode: str) -> str:
    """`yaml.safe_dump` of the mode dict, keys sorted: the file srtctl writes per mode."""
    return yaml.safe_dump(engine_config(ctx, mode))


def config_file(mode: str) -> str:
    return f"trtllm_config_{SHORT_MODE[mode]}.yaml"


def uses_numactl(ctx: BuildContext, proc: WorkerProcess) -> bool:
    bind = _backend(ctx).numa_memory_bind
    if bind is not None:
        return bind
    return proc.role != "agg" and ctx.config.resources.gpu_type.lower() in NUMA_GPU_TYPES


def worker_argv(ctx: BuildContext, endpoint: Endpoint, proc: WorkerProcess) -> list[str]:
    argv = nsys_prefix(ctx, proc, trtllm=True)
    if uses_numactl(ctx, proc):
        argv += ["numactl", "-m", "0,1"]
    argv.append("trtllm-llmapi-launch")
    cfg_path = f"/logs/{config_file(proc.mode)}"
    if ctx.frontend_type == "trtllm_serve":
        port = proc.http_port if ctx.config.is_disaggregated else FRONTEND_PUBLIC_PORT
        argv += ["trtllm-serve", ctx.model_arg, "--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
        mode_cfg = ctx.mode_config(proc.mode)
        for key in PARALLEL_KEYS:
            if key in mode_cfg:
                argv += [f"--{key}", str(mode_cfg[key])]
        argv += ["--config", cfg_path]
        return argv
    argv += ["python3", "-m", "dynamo.trtllm", "--model-path", ctx.model_arg]
    argv += ["--served-model-name", ctx.served_model_name]
    argv += disaggregation_mode(proc)
    argv += ["--extra-engine-args", cfg_path]
    argv += ["--request-plane", ctx.config.dynamo.request_plane]
    if ctx.config.observability.enabled:
        argv.append("--publish-events-and-metrics")
    return argv


def build_workers(ctx: BuildContext) -> list[ProcessSpec]:
    specs = []
    gpn = ctx.config.resources.gpus_per_node
    for endpoint in ctx.topology.endpoints:
        procs = ctx.topology.processes_of(endpoint)
        leader = procs[0]
        env = base_worker_env(ctx, leader, request_plane=False)
        add_recipe_env(ctx, env, leader, templated=False)
        env.set("TRTLLM_EPLB_SHM_NAME", ctx.values.eplb_shm_name)
        add_top_level_env(ctx, env)
        profiling_worker_env(ctx, leader, env)
        if len(leader.gpu_indices) < gpn:
            env.set("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in leader.gpu_indices))
        name = f"{leader.node}_{SHORT_MODE[leader.mode]}_w{leader.index}"
        specs.append(
            ProcessSpec(
                stage="workers",
                name=name,
                nodes=list(endpoint.nodes),
                argv=worker_argv(ctx, endpoint, leader),
                env=env.env,
                env_sources=env.sources,
                bash_preamble=worker_preamble(ctx, leader.mode, leader.index),
                container_image=ctx.container,
                container_mounts=ctx.base_mounts(),
                srun=SrunSpec(
                    nodes=len(endpoint.nodes),
                    ntasks=len(endpoint.nodes) * len(endpoint.gpu_indices),
                    nodelist=list(endpoint.nodes),
                    output=f"{ctx.values.log_dir}/{name}.out",
                    mpi="pmix",
                    oversubscribe=True,
                    cpu_bind="verbose,none",
                    export_env={"ENROOT_REMAP_ROOT": "yes"} if ctx.installs_dynamo else {},
                ),
                worker=WorkerRecord.of(leader, "per_endpoint"),
            )
        )
    return specs


def generated_files(ctx: BuildContext) -> dict[str, str]:
    modes = {p.mode for p in ctx.topology.processes}
    return {
        config_file(m): engine_yaml(ctx, m)
        for m in ("prefill", "decode", "aggregated")
        if m in modes
    }
