"""`sglang_router.launch_router` (doc §7, type `sglang`): the router lists the workers itself."""

from __future__ import annotations

from srt_srtctl.context import BuildContext
from srt_srtctl.environment import EnvBuilder
from srt_srtctl.flags import lookup, verbatim_args
from srt_srtctl.process import ProcessSpec, SrunSpec


def _scheme(ctx: BuildContext, mode: str) -> str:
    return "grpc" if lookup(ctx.mode_config(mode), "grpc-mode") is True else "http"


def worker_url_args(ctx: BuildContext) -> list[str]:
    ip = ctx.values.ip
    leaders = [p for p in ctx.topology.processes if p.is_leader]
    if ctx.config.is_disaggregated:
        args = ["--pd-disaggregation"]
        for p in leaders:
            if p.role == "prefill":
                url = f"{_scheme(ctx, 'prefill')}://{ip(p.node)}:{p.http_port}"
                args += ["--prefill", url, str(p.bootstrap_port)]
        for p in leaders:
            if p.role == "decode":
                args += ["--decode", f"{_scheme(ctx, 'decode')}://{ip(p.node)}:{p.http_port}"]
        return args
    urls = [f"{_scheme(ctx, 'aggregated')}://{ip(p.node)}:{p.http_port}" for p in leaders]
    return ["--worker-urls", *urls]


def build_routers(ctx: BuildContext) -> list[ProcessSpec]:
    topo = ctx.topology.frontend
    specs = []
    for i, node in enumerate(topo.frontend_nodes):
        name = f"{node}_router_{i}"
        env = EnvBuilder()
        env.update(ctx.config.frontend.env, "recipe:frontend.env")
        argv = ["python", "-m", "sglang_router.launch_router", *worker_url_args(ctx)]
        argv += ["--host", "0.0.0.0", "--port", str(topo.frontend_port)]  # noqa: S104
        argv += verbatim_args(ctx.config.frontend.args)
        specs.append(
            ProcessSpec(
                stage="frontend",
                name=name,
                nodes=[node],
                argv=argv,
                env=env.env,
                env_sources=env.sources,
                container_image=ctx.container,
                container_mounts=ctx.base_mounts(),
                srun=SrunSpec(nodelist=[node], output=f"{ctx.values.log_dir}/{name}.out"),
            )
        )
    return specs
