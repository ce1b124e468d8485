"""The shared suite every srt service kind passes, run against gms."""

from __future__ import annotations

import pytest
import srt_gms.plugin
from srt_gms.kind import GmsKind
from srt_services.testing.contracts import KindCase, ServiceKindContract

#: GMS needs shadow engine recovery on, and workers to attach to.
FAILOVER_JOB = {
    "engine": {"type": "vllm", "failover": True},
    "observability": {"metrics": False},
    "frontend": {"type": "vllm", "command": ["python3", "-m", "frontend"]},
    "roles": {
        "prefill": {"workers": 2, "gpus_per_worker": 4, "command": ["python3", "-m", "worker"]},
        "decode": {"workers": 1, "command": ["python3", "-m", "worker"]},
    },
    "resources": {"gpus_per_node": 8},
}


class TestGmsKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            GmsKind,
            entries=[
                {},
                {"placement": {"node": "decode", "per": "worker"}, "args": ["--verbose"]},
                {
                    "placement": {"node": "prefill"},
                    "options": {"module": "dynamo.gpu_memory_service"},
                },
                {"readiness": {"log": {"pattern": "GMS ready:"}, "timeout_seconds": 600}},
                {"options": {"python": "/opt/venv/bin/python", "sockets_per_device": 1}},
            ],
            recipe=FAILOVER_JOB,
            plugin=srt_gms.plugin,
        )
