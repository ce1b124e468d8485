"""The suite every engine passes, run against ``dynamo`` with each backend, aggregated and
disaggregated, one worker spanning two nodes, and a hand-written frontend."""

from __future__ import annotations

from typing import Any

import pytest
import srt_dynamo.plugin
from srt_dynamo.engine import DynamoEngine
from srt_services.testing.contracts import EngineCase, EngineContract


def sample(backend: str, roles: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {
        "schema": 2,
        "name": f"s-{backend}",
        "observability": {"metrics": False},
        "resources": {"gpus_per_node": 4},
        "engine": {"type": backend, "model": "/models/Qwen3-0.6B"},
        "frontend": {"type": "dynamo"},
        "roles": roles,
        # etcd and NATS come from srt-etcd and srt-nats, not registered in these plans
        "services": [{"name": "etcd", "enabled": False}, {"name": "nats", "enabled": False}],
        **top,
    }


DISAGG = {
    "prefill": {"workers": 2, "gpus_per_worker": 2, "config": {"tensor-parallel-size": 2}},
    "decode": {"workers": 1, "gpus_per_worker": 4},
}


class TestDynamoEngine(EngineContract):
    @pytest.fixture
    def engine_case(self) -> EngineCase:
        return EngineCase(
            DynamoEngine,
            recipes=[
                sample("mocker", {"agg": {"workers": 1}}),
                sample("mocker", {"prefill": {"workers": 1}, "decode": {"workers": 1}}),
                sample("sglang", DISAGG, dynamo={"request_plane": "nats"}),
                sample("sglang", {"agg": {"workers": 1, "gpus_per_worker": 8}}),
                sample(
                    "vllm",
                    DISAGG,
                    engine={"type": "vllm", "model": "/m/x", "options": {"kv_events": True}},
                ),
                sample("vllm", {"agg": {"workers": 1, "config": {"data-parallel-size": 4}}}),
                sample(
                    "trtllm",
                    DISAGG,
                    engine={
                        "type": "trtllm",
                        "model": "/m/x",
                        "options": {"gpu_type": "gb200", "sequential_node_start": 1},
                    },
                ),
            ],
            plugin=srt_dynamo.plugin,
            plugin_name="srt-dynamo",
        )


def test_plugins_list_names_the_engine() -> None:
    """``srt plugins list`` says what an installed engine plugin provides (it once showed
    only service kinds, so an engine plugin looked as if it provided nothing)."""
    import subprocess
    import sys
    from pathlib import Path

    srt = Path(sys.executable).with_name("srt")
    out = subprocess.run(
        [str(srt), "plugins", "list", "-v"], capture_output=True, text=True, check=True
    ).stdout
    block = out[out.index("srt-dynamo") :]
    assert "provides:    engine dynamo" in block.splitlines()[1:4] or any(
        line.strip() == "provides:    engine dynamo" for line in block.splitlines()[:6]
    ), out
