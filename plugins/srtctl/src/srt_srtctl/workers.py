"""Worker launches common to every backend (doc §5): srun shape, env layers, preamble.

The backend modules only say what differs (argv, a few env variables, how GPUs are bound);
everything srtctl does the same way for all engines lives here, so it cannot drift per engine.
"""

from __future__ import annotations

from collections.abc import Callable

from srt_srtctl.context import BuildContext
from srt_srtctl.dynamo_install import wheel_name
from srt_srtctl.environment import DEFAULT_DYN_LOG, EnvBuilder, expand_node_templates
from srt_srtctl.preamble import worker_preamble
from srt_srtctl.process import ProcessSpec, SrunSpec, WorkerRecord
from srt_srtctl.profiling import profiling_worker_env
from srt_srtctl.topology import ETCD_PORT, NATS_PORT, Endpoint, WorkerProcess

SHORT_MODE = {"prefill": "prefill", "decode": "decode", "aggregated": "agg"}


def base_worker_env(ctx: BuildContext, proc: WorkerProcess, *, request_plane: bool) -> EnvBuilder:
    """Layers 1-3: discovery addresses, system port, planes, then DYN_LOG's default."""
    cfg = ctx.config
    roles = ctx.topology.roles
    env = EnvBuilder()
    env.set("HEAD_NODE_IP", ctx.values.ip(roles.head))
    env.set("ETCD_ENDPOINTS", f"http://{roles.infra}:{ETCD_PORT}")
    env.set("NATS_SERVER", f"nats://{roles.infra}:{NATS_PORT}")
    env.set("DYN_SYSTEM_PORT", str(proc.sys_port))
    if request_plane:
        env.set("DYN_REQUEST_PLANE", cfg.dynamo.request_plane)
    env.set("DYN_SKIP_SGLANG_LOG_FORMATTING", "1")
    if cfg.dynamo.event_plane:
        env.set("DYN_EVENT_PLANE", cfg.dynamo.event_plane)
    obs = cfg.observability
    if obs.enable_otel and obs.otel_endpoint:
        env.set("DYN_LOGGING_JSONL", "true")
        env.set("OTEL_EXPORT_ENABLED", "true")
        env.set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", obs.otel_endpoint)
        env.set("OTEL_SERVICE_NAME", f"dynamo-{SHORT_MODE[proc.mode]}")
    env.setdefault("DYN_LOG", DEFAULT_DYN_LOG)
    return env


def add_recipe_env(
    ctx: BuildContext, env: EnvBuilder, proc: WorkerProcess, *, templated: bool
) -> None:
    """Layer 4 (mode env, with {node}/{node_id}) and layer 5 (top-level `environment`)."""
    mode_env = ctx.config.backend.environment_for(proc.mode)
    source = f"recipe:backend.{proc.mode}_environment"
    node_id = (
        ctx.topology.roles.workers.index(proc.node)
        if proc.node in ctx.topology.roles.workers
        else 0
    )
    for key, value in mode_env.items():
        env.set(
            key, expand_node_templates(value, proc.node, node_id) if templated else value, source
        )


def add_top_level_env(ctx: BuildContext, env: EnvBuilder) -> None:
    env.update(ctx.config.environment, "recipe:environment")
    for key, value in dynamo_wheel_env(ctx).items():
        env.set(key, value, "dynamo.wheel")


def dynamo_wheel_env(ctx: BuildContext) -> dict[str, str]:
    wheel = ctx.config.dynamo.wheel
    if not wheel:
        return {}
    return {"DYNAMO_WHEEL_NAME": wheel_name(wheel), "DYNAMO_VERSION": wheel}


def worker_mounts(ctx: BuildContext) -> dict[str, str]:
    return ctx.base_mounts()


def per_process_srun(ctx: BuildContext, proc: WorkerProcess, name: str) -> SrunSpec:
    return SrunSpec(
        nodes=1,
        ntasks=1,
        nodelist=[proc.node],
        output=f"{ctx.values.log_dir}/{name}.out",
        export_env={"ENROOT_REMAP_ROOT": "yes"} if ctx.installs_dynamo else {},
        options=dict(ctx.config.srun_options),
    )


ArgvBuilder = Callable[[BuildContext, Endpoint, WorkerProcess], list[str]]
EnvHook = Callable[[BuildContext, Endpoint, WorkerProcess, EnvBuilder], None]


def per_process_worker(
    ctx: BuildContext,
    endpoint: Endpoint,
    proc: WorkerProcess,
    argv: list[str],
    *,
    gpu_env: bool,
    extra_env: EnvHook | None = None,
    unset: list[str] | None = None,
) -> ProcessSpec:
    """One srun on one node for sglang, vllm and mocker workers."""
    env = base_worker_env(ctx, proc, request_plane=True)
    add_recipe_env(ctx, env, proc, templated=True)
    add_top_level_env(ctx, env)
    profiling_worker_env(ctx, proc, env)
    if gpu_env and len(proc.gpu_indices) < ctx.config.resources.gpus_per_node:
        env.set("CUDA_VISIBLE_DEVICES", ",".join(str(g) for g in proc.gpu_indices))
    if extra_env is not None:
        extra_env(ctx, endpoint, proc, env)
    name = f"{proc.node}_{SHORT_MODE[proc.mode]}_w{proc.index}"
    return ProcessSpec(
        stage="workers",
        name=name,
        nodes=[proc.node],
        argv=argv,
        env=env.env,
        env_sources=env.sources,
        env_unset=list(unset or []),
        bash_preamble=worker_preamble(ctx, proc.mode, proc.index),
        container_image=ctx.container,
        container_mounts=worker_mounts(ctx),
        srun=per_process_srun(ctx, proc, name),
        worker=WorkerRecord.of(proc, "per_process"),
    )
