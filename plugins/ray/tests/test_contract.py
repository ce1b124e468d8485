"""The shared suites every srt service kind and probe pass, run against ray and ray-fleet."""

from __future__ import annotations

import pytest
import srt_ray.plugin
from srt_ray.fleet import RayFleetProbe
from srt_ray.kind import RayKind
from srt_services.testing.contracts import (
    JOB_WITH_WORKERS,
    KindCase,
    ProbeCase,
    ProbeContract,
    ServiceKindContract,
)


class TestRayKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            RayKind,
            entries=[
                {},
                {"placement": {"node": "head"}, "options": {"num_cpus": 4, "num_gpus": 2}},
                {"placement": {"node": "all"}, "args": ["--object-store-memory=1000000000"]},
                {"options": {"port": 7000, "dashboard_port": 9265, "binary": "/opt/ray/bin/ray"}},
                {"nodes": 2, "env": {"CUDA_VISIBLE_DEVICES": "0"}},
            ],
            recipe=JOB_WITH_WORKERS,
            plugin=srt_ray.plugin,
        )


class TestRayFleetProbe(ProbeContract):
    @pytest.fixture
    def probe_case(self) -> ProbeCase:
        return ProbeCase(
            RayFleetProbe,
            configs=[
                {"port": 8265, "members": [{"node": "node0", "ip": "127.0.0.1"}]},
                {
                    "port": 9265,
                    "members": [
                        {"node": "n1", "ip": "10.251.0.11"},
                        {"node": "n2", "ip": "10.251.0.12"},
                    ],
                    "started": r"Ray\ runtime\ started",
                },
            ],
            plugin=srt_ray.plugin,
        )
