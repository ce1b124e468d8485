"""The shared suite every srt service kind passes, run against both Mooncake kinds."""

from __future__ import annotations

import pytest
import srt_mooncake.plugin
from srt_mooncake.master import MooncakeMasterKind
from srt_mooncake.store import MooncakeStoreKind
from srt_services.testing.contracts import JOB_WITH_WORKERS, KindCase, ServiceKindContract


class TestMooncakeMasterKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            MooncakeMasterKind,
            entries=[
                {},
                {
                    "options": {"rpc_port": 18700, "metadata_port": None, "metrics_port": 18702},
                    "args": ["--client_ttl=20"],
                },
                {"placement": {"node": "dedicated"}, "container": "mooncake:0.3"},
                {
                    "placement": {"node": "head"},
                    "options": {
                        "binary": "/opt/mooncake/bin/mooncake_master",
                        "store_config": {"global_segment_size": "4GB", "protocol": "rdma"},
                    },
                },
                {"external": "10.0.0.5:8700", "options": {"metadata_port": 9701}},
                {"command": ["trtllm-serve", "mooncake_master", "--rpc_port", "8700"]},
            ],
            recipe=JOB_WITH_WORKERS,
            plugin=srt_mooncake.plugin,
        )


MASTER = {"name": "mooncake-master", "type": "mooncake-master"}


class TestMooncakeStoreKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            MooncakeStoreKind,
            entries=[
                {},
                {"placement": {"node": "agg"}, "args": ["--port", "8810"]},
                {
                    "placement": {"node": "head"},
                    "options": {"port": 8820, "global_segment_size": "64MB"},
                    "env": {"MOONCAKE_PROTOCOL": "rdma", "MOONCAKE_DEVICE": "mlx5_0"},
                },
                {"options": {"binary": "/opt/mooncake/bin/mc_store_rest_server"}},
                {
                    "command": ["python3", "-m", "mooncake.mooncake_store_service"],
                    "args": ["--port=8830"],
                },
            ],
            recipe={**JOB_WITH_WORKERS, "services": [MASTER]},
            plugin=srt_mooncake.plugin,
        )
