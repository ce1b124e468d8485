"""The shared suite every srt service kind passes, run against the four kinds of this plugin."""

from __future__ import annotations

import pytest
import srt_exporters.plugin
from srt_exporters.kind import DcgmExporterKind, NodeExporterKind, ProcessExporterKind
from srt_exporters.prometheus import PrometheusKind
from srt_services.testing.contracts import JOB_WITH_WORKERS, KindCase, ServiceKindContract

OFF = {**JOB_WITH_WORKERS, "observability": {"metrics": False}}


class TestNodeExporterKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            NodeExporterKind,
            entries=[
                {},
                {"options": {"port": 19101, "collectors": ["cpu", "meminfo"]}},
                {"placement": {"node": "all"}, "options": {"binary": "/opt/node_exporter"}},
                {"container": "quay.io/prometheus/node-exporter:v1.8.2"},
            ],
            recipe=OFF,
            plugin=srt_exporters.plugin,
        )


class TestProcessExporterKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            ProcessExporterKind,
            entries=[
                {},
                {"options": {"port": 19256, "groups": [{"name": "x", "cmdline": ["a{2,}"]}]}},
                {"options": {"if_missing": "fail"}, "args": ["-gather-smaps=false"]},
            ],
            recipe=OFF,
            plugin=srt_exporters.plugin,
        )


class TestDcgmExporterKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            DcgmExporterKind,
            entries=[
                {},
                {"options": {"port": 19401, "collect_interval_ms": 500}},
                {"container": "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"},
            ],
            recipe=OFF,
            plugin=srt_exporters.plugin,
        )


class TestPrometheusKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self) -> KindCase:
        return KindCase(
            PrometheusKind,
            entries=[
                {},
                {"options": {"port": 19090, "scrape_interval_seconds": 5, "retention": "30d"}},
                {"placement": {"node": "head"}, "options": {"binary": "/opt/prometheus"}},
            ],
            recipe=OFF,
            plugin=srt_exporters.plugin,
        )
