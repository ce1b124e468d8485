"""The kit's fixtures set to srt-dynamo's tests: only core and this plugin are registered
(plans hold no etcd: srt-etcd, which implies it, is not part of these plugin sets)."""

from __future__ import annotations

import pytest
import srt_dynamo.plugin
from srt_services.testing.kit import KitSettings


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    return KitSettings(
        srt_dynamo.plugin,
        "srt-dynamo",
        "recipe.yaml",
        local=True,
        job_dir="/jobs/j",
        fill={"observability": {"metrics": False}},
    )
