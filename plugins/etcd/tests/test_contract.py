"""The shared suite every srt service kind passes, run against etcd."""

from __future__ import annotations

import pytest
import srt_etcd.plugin
from srt_etcd.kind import EtcdKind
from srt_services.testing.contracts import JOB_WITH_WORKERS, KindCase, ServiceKindContract


class TestEtcdKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            EtcdKind,
            entries=[
                {},
                {"options": {"client_port": 2479, "peer_port": 2480}, "args": ["--debug"]},
                {"placement": {"node": "dedicated"}},
                {"placement": {"node": "head"}, "options": {"binary": "/opt/etcd/etcd"}},
                {"external": "http://10.0.0.5:2379,http://10.0.0.6:2379"},
                {"command": ["/opt/etcd/etcd", "--data-dir", "{work_dir}/d"]},
            ],
            recipe=JOB_WITH_WORKERS,
            plugin=srt_etcd.plugin,
        )
