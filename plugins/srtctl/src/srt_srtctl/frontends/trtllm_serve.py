"""`trtllm-serve disaggregated` (doc §7, type `trtllm_serve`): an orchestrator fed by ser.yaml."""

from __future__ import annotations

from typing import Any

import yaml

from srt_srtctl.context import BuildContext
from srt_srtctl.process import ProcessSpec, SrunSpec
from srt_srtctl.topology import FRONTEND_PUBLIC_PORT


def ser_config(ctx: BuildContext) -> dict[str, Any]:
    ip = ctx.values.ip
    leaders = [p for p in ctx.topology.processes if p.is_leader]
    ctx_urls = [f"{ip(p.node)}:{p.http_port}" for p in leaders if p.role == "prefill"]
    gen_urls = [f"{ip(p.node)}:{p.http_port}" for p in leaders if p.role == "decode"]
    return {
        "hostname": "0.0.0.0",  # noqa: S104
        "port": FRONTEND_PUBLIC_PORT,
        "context_servers": {"num_instances": len(ctx_urls), "urls": ctx_urls},
        "generation_servers": {"num_instances": len(gen_urls), "urls": gen_urls},
    }


def ser_yaml(ctx: BuildContext) -> str:
    return yaml.safe_dump(ser_config(ctx))


def build_orchestrator(ctx: BuildContext) -> list[ProcessSpec]:
    if not ctx.config.is_disaggregated:
        return []  # the single aggregated worker serves port 8000 itself
    node = ctx.topology.roles.head
    name = f"{node}_trtllm_serve_orchestrator"
    return [
        ProcessSpec(
            stage="frontend",
            name=name,
            nodes=[node],
            argv=["trtllm-serve", "disaggregated", "--config", "/logs/ser.yaml"],
            container_image=ctx.container,
            container_mounts=ctx.base_mounts(),
            srun=SrunSpec(nodelist=[node], output=f"{ctx.values.log_dir}/{name}.out", mpi="pmix"),
        )
    ]
