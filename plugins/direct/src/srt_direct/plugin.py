"""srt-direct's hook implementations (import-light: the engines load on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import Engine


@hookimpl
def srt_register_engines() -> list[type[Engine]]:
    from srt_direct.sglang import SGLangEngine
    from srt_direct.trtllm_serve import TrtllmServeEngine
    from srt_direct.vllm import VllmEngine

    return [SGLangEngine, VllmEngine, TrtllmServeEngine]
