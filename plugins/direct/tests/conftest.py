"""The kit's fixtures set to srt-direct's tests: only core and this plugin are registered."""

from __future__ import annotations

import pytest
import srt_direct.plugin
from srt_services.testing.kit import KitSettings


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    return KitSettings(
        srt_direct.plugin,
        "srt-direct",
        "recipe.yaml",
        job_dir="/jobs/j",
        fill={"observability": {"metrics": False}},
    )
