"""Model readiness (doc §9): which URL the orchestrator polls and how many workers it expects."""

from __future__ import annotations

from dataclasses import dataclass

from srt_srtctl.context import BuildContext
from srt_srtctl.topology import vllm_data_parallel

DYNAMO_RULE = (
    "GET /health -> count instances with endpoint=='generate' by component: prefill; "
    "decode|tensorrt_llm|backend count as decode"
)
RULES = {
    "dynamo": (DYNAMO_RULE, "/health"),
    "sglang": (
        "GET /workers -> stats.prefill_count >= n_prefill and decode_count+regular_count >= n_decode",
        "/workers",
    ),
    "trtllm_serve": ("GET /health returns 200", "/health"),
    "vllm": ("GET /health returns 200 and /v1/models lists a model", "/health"),
}


@dataclass(frozen=True)
class HealthCheck:
    url: str
    host: str
    port: int
    frontend_type: str
    n_prefill: int
    n_decode: int
    max_attempts: int
    interval_seconds: int
    ready_rule: str

    @property
    def timeout(self) -> float:
        return float(self.max_attempts * self.interval_seconds)


def expected_counts(ctx: BuildContext) -> tuple[int, int]:
    cfg = ctx.config
    counts = {"prefill": 0, "decode": 0, "agg": 0}
    for endpoint in ctx.topology.endpoints:
        dp = vllm_data_parallel(ctx.config, endpoint) if ctx.frontend_type == "dynamo" else None
        if dp is not None:
            counts[endpoint.role] += len(endpoint.nodes)
        else:
            counts[endpoint.role] += 1
    if cfg.is_disaggregated:
        return counts["prefill"], counts["decode"]
    return 0, counts["agg"]


def build_health_check(ctx: BuildContext) -> HealthCheck:
    hc = ctx.config.health_check
    ftype = ctx.frontend_type
    rule, path = RULES[ftype]
    host = ctx.topology.frontend.public_node
    port = ctx.topology.frontend.public_port
    n_prefill, n_decode = expected_counts(ctx)
    return HealthCheck(
        url=f"http://{ctx.values.ip(host)}:{port}{path}",
        host=host,
        port=port,
        frontend_type=ftype,
        n_prefill=n_prefill,
        n_decode=n_decode,
        max_attempts=hc.max_attempts,
        interval_seconds=hc.interval_seconds,
        ready_rule=rule,
    )
