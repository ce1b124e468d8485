"""The shared suites every srt kind and probe pass, run against the oarbank kind and its
two probes (``oarbank-ready``, ``oarbank-probe``) with a real module bundle on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import srt_oarbank.plugin
from oarbank_testkit import make_bundle, service_entry
from srt_oarbank.srt.kind import OarbankKind
from srt_oarbank.srt.probes import OarbankProbe, OarbankReadyProbe
from srt_services.testing.contracts import (
    JOB_WITH_WORKERS,
    KindCase,
    ProbeCase,
    ProbeContract,
    ServiceKindContract,
)

PROBE = {"name": "health", "exec": ["bin/fake"]}


@pytest.fixture
def bundle(tmp_path: Path) -> str:
    fake = make_bundle(
        tmp_path / "contract", services=[service_entry("db", lifecycle="always")], probes=[PROBE]
    )
    return str(fake.root)


class TestOarbankKind(ServiceKindContract):
    @pytest.fixture
    def kind_case(self, bundle: str) -> KindCase:
        return KindCase(
            OarbankKind,
            entries=[
                {"options": {"bundle": bundle, "service": "db"}},
                {
                    "options": {
                        "bundle": bundle,
                        "service": "db",
                        "settings": {"nested": {"a": [1, 2]}, "text": "{node} {{x}}"},
                        "node_id": "{node}-{index}",
                    },
                    "placement": {"node": "workers"},
                },
            ],
            recipe=JOB_WITH_WORKERS,
            plugin=srt_oarbank.plugin,
        )


class TestOarbankReadyProbe(ProbeContract):
    @pytest.fixture
    def probe_case(self, bundle: str) -> ProbeCase:
        return ProbeCase(
            OarbankReadyProbe,
            configs=[{"bundle": bundle, "service": "db"}],
            plugin=srt_oarbank.plugin,
        )


class TestOarbankProbe(ProbeContract):
    @pytest.fixture
    def probe_case(self, bundle: str) -> ProbeCase:
        return ProbeCase(
            OarbankProbe,
            configs=[{"bundle": bundle, "probe": "health", "settings": {"k": "v"}}],
            plugin=srt_oarbank.plugin,
        )
