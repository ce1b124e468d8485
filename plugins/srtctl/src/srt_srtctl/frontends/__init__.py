"""Frontend layer builders (doc §7): what serves the public port in front of the workers."""

from __future__ import annotations

from srt_srtctl.context import BuildContext
from srt_srtctl.frontends import dynamo, nginx, sglang_router, trtllm_serve
from srt_srtctl.process import ProcessSpec


def build_frontends(ctx: BuildContext) -> list[ProcessSpec]:
    specs: list[ProcessSpec] = []
    if ctx.topology.frontend.nginx_node is not None:
        specs.append(nginx.build_nginx(ctx))
    ftype = ctx.frontend_type
    if ftype == "dynamo":
        specs += dynamo.build_frontends(ctx)
    elif ftype == "sglang":
        specs += sglang_router.build_routers(ctx)
    elif ftype == "trtllm_serve":
        specs += trtllm_serve.build_orchestrator(ctx)
    return specs


def generated_files(ctx: BuildContext) -> dict[str, str]:
    files: dict[str, str] = {}
    if ctx.topology.frontend.nginx_node is not None:
        files["nginx.conf"] = nginx.nginx_conf(ctx)
    if ctx.frontend_type == "trtllm_serve" and ctx.config.is_disaggregated:
        files["ser.yaml"] = trtllm_serve.ser_yaml(ctx)
    return files
