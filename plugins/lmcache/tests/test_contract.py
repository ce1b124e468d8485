"""The shared suite every srt service kind passes, run against lmcache-server."""

from __future__ import annotations

import pytest
import srt_lmcache.plugin
from srt_lmcache.kind import LMCacheServerKind
from srt_services.testing.contracts import JOB_WITH_WORKERS, KindCase, ServiceKindContract


class TestLMCacheServerKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            LMCacheServerKind,
            entries=[
                {},
                {"options": {"port": 9750, "http_port": 9751, "l1_size_gb": 0.5}},
                {"placement": {"node": "agg"}, "args": ["--chunk-size", "512"]},
                {"options": {"host": "127.0.0.1", "http_host": "127.0.0.1", "binary": "/opt/lm"}},
                {"args": ["--l1-manager", '{"type": "DRAM", "size_gb": 4}']},
                {"command": ["lmcache", "server", "--port", "8750"], "placement": {"node": "head"}},
                {"env": {"PYTHONHASHSEED": "0"}, "options": {"eviction_policy": "ARC"}},
            ],
            recipe=JOB_WITH_WORKERS,
            plugin=srt_lmcache.plugin,
        )
