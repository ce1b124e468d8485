"""The suite every engine passes, run against ``sglang``, ``vllm`` and ``trtllm-serve``.

No GPU here: sglang, vLLM and TensorRT-LLM are not run; these engines are tested by their
plans (argv, environment, files, ports, probes) against what srtctl builds."""

from __future__ import annotations

from typing import Any

import pytest
import srt_direct.plugin
from srt_direct.sglang import SGLangEngine
from srt_direct.trtllm_serve import TrtllmServeEngine
from srt_direct.vllm import VllmEngine
from srt_services.testing.contracts import EngineCase, EngineContract


def sample(front: str, backend: str, roles: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "schema": 2,
        "name": f"s-{front}",
        "observability": {"metrics": False},
        "resources": {"gpus_per_node": 8},
        "engine": {"type": backend, "model": "/model"},
        "frontend": {"type": front},
        "roles": roles,
        **top,
    }


DISAGG = {
    "prefill": {"workers": 2, "gpus_per_worker": 4},
    "decode": {"workers": 1, "gpus_per_worker": 8},
}


class TestSGLangEngine(EngineContract):
    @pytest.fixture
    def engine_case(self) -> EngineCase:
        return EngineCase(
            SGLangEngine,
            recipes=[
                sample("sglang", "sglang", {"agg": {"workers": 2, "gpus_per_worker": 4}}),
                sample("sglang", "sglang", DISAGG),
                sample("sglang", "sglang", {"agg": {"workers": 1, "gpus_per_worker": 16}}),
            ],
            plugin=srt_direct.plugin,
            plugin_name="srt-direct",
        )


class TestVllmEngine(EngineContract):
    @pytest.fixture
    def engine_case(self) -> EngineCase:
        return EngineCase(
            VllmEngine,
            recipes=[
                sample("vllm", "vllm", {"agg": {"workers": 1, "gpus_per_worker": 2}}),
                sample("vllm", "vllm", {"agg": {"workers": 1, "gpus_per_worker": 16}}),
            ],
            plugin=srt_direct.plugin,
            plugin_name="srt-direct",
        )


class TestTrtllmServeEngine(EngineContract):
    @pytest.fixture
    def engine_case(self) -> EngineCase:
        return EngineCase(
            TrtllmServeEngine,
            recipes=[
                sample("trtllm-serve", "trtllm", {"agg": {"workers": 1}}),
                sample("trtllm-serve", "trtllm", DISAGG),
            ],
            plugin=srt_direct.plugin,
            plugin_name="srt-direct",
        )
