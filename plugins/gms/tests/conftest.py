"""The kit's fixtures (srt_plugins, srt_load, srt_plan, ...) set to srt-gms's tests."""

from __future__ import annotations

import pytest
import srt_gms.plugin
from srt_services.testing.kit import KitSettings


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    """Only core and this plugin, so other installed plugins cannot change what is tested;
    recipes planned on local nodes (127.0.0.x) with the job directory /jobs/j."""
    return KitSettings(srt_gms.plugin, "srt-gms", "recipe.yaml", local=True, job_dir="/jobs/j")
