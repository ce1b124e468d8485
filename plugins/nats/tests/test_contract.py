"""The shared suite every srt service kind passes, run against nats."""

from __future__ import annotations

import pytest
import srt_nats.plugin
from srt_nats.kind import NatsKind
from srt_services.testing.contracts import JOB_WITH_WORKERS, KindCase, ServiceKindContract


class TestNatsKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            NatsKind,
            entries=[
                {},
                {"options": {"max_payload_mb": 4, "port": 4300, "monitor_port": 8300}},
                {"options": {"monitor_port": None}, "args": ["-DV"]},
                {"placement": {"node": "dedicated"}},
                {"external": "tls://10.0.0.5:4222"},
                {"command": ["/opt/nats/nats-server", "-p", "4222"]},
            ],
            recipe={**JOB_WITH_WORKERS, "dynamo": {"request_plane": "nats"}},
            plugin=srt_nats.plugin,
        )
