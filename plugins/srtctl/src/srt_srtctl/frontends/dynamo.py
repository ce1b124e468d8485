"""`python3 -m dynamo.frontend` routers (doc §7, type `dynamo`)."""

from __future__ import annotations

from srt_srtctl.context import BuildContext
from srt_srtctl.environment import EnvBuilder
from srt_srtctl.flags import verbatim_args
from srt_srtctl.preamble import frontend_preamble
from srt_srtctl.process import ProcessSpec, SrunSpec
from srt_srtctl.topology import ETCD_PORT, NATS_PORT
from srt_srtctl.workers import dynamo_wheel_env


def frontend_env(ctx: BuildContext) -> EnvBuilder:
    cfg = ctx.config
    infra = ctx.topology.roles.infra
    env = EnvBuilder()
    env.set("ETCD_ENDPOINTS", f"http://{infra}:{ETCD_PORT}")
    env.set("NATS_SERVER", f"nats://{infra}:{NATS_PORT}")
    env.set("DYN_REQUEST_PLANE", cfg.dynamo.request_plane)
    env.set("DYN_SKIP_SGLANG_LOG_FORMATTING", "1")
    if cfg.dynamo.event_plane:
        env.set("DYN_EVENT_PLANE", cfg.dynamo.event_plane)
    obs = cfg.observability
    if obs.enable_otel and obs.otel_endpoint:
        env.set("DYN_LOGGING_JSONL", "true")
        env.set("OTEL_EXPORT_ENABLED", "true")
        env.set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", obs.otel_endpoint)
        env.set("OTEL_SERVICE_NAME", "dynamo-frontend")
    env.update(cfg.environment, "recipe:environment")
    for key, value in dynamo_wheel_env(ctx).items():
        env.set(key, value, "dynamo.wheel")
    env.update(cfg.frontend.env, "recipe:frontend.env")
    return env


def build_frontends(ctx: BuildContext) -> list[ProcessSpec]:
    topo = ctx.topology.frontend
    specs = []
    for i, node in enumerate(topo.frontend_nodes):
        name = f"{node}_frontend_{i}"
        env = frontend_env(ctx)
        argv = ["python3", "-m", "dynamo.frontend", f"--http-port={topo.frontend_port}"]
        argv += verbatim_args(ctx.config.frontend.args)
        specs.append(
            ProcessSpec(
                stage="frontend",
                name=name,
                nodes=[node],
                argv=argv,
                env=env.env,
                env_sources=env.sources,
                bash_preamble=frontend_preamble(ctx),
                container_image=ctx.container,
                container_mounts=ctx.base_mounts(),
                srun=SrunSpec(
                    nodelist=[node],
                    output=f"{ctx.values.log_dir}/{name}.out",
                    mpi="pmix",
                    export_env={"ENROOT_REMAP_ROOT": "yes"} if ctx.installs_dynamo else {},
                ),
            )
        )
    return specs
