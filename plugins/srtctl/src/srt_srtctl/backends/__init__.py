"""Per-engine worker builders: each knows its argv and what it adds to the common env."""

from __future__ import annotations

from srt_srtctl.backends import mocker, sglang, trtllm, vllm
from srt_srtctl.context import BuildContext
from srt_srtctl.process import ProcessSpec

BUILDERS = {
    "sglang": sglang.build_workers,
    "vllm": vllm.build_workers,
    "trtllm": trtllm.build_workers,
    "mocker": mocker.build_workers,
}


def build_workers(ctx: BuildContext) -> list[ProcessSpec]:
    return BUILDERS[ctx.config.backend_type](ctx)
