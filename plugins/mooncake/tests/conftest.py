"""The kit's fixtures (srt_plugins, srt_load, srt_plan, ...) set to srt-mooncake's tests, and
where Mooncake's binaries are (the runtime tests need the real ones)."""

from __future__ import annotations

import pytest
import srt_mooncake.plugin
from srt_services.testing import needs
from srt_services.testing.kit import KitSettings

BINARIES = ("mooncake_master", "mc_store_rest_server")


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    """Only core and this plugin, so other installed plugins cannot change what is tested;
    recipes planned on local nodes (127.0.0.x) with the job directory /jobs/j.

    srt-exporters is not in this plugin set: without ``observability: {metrics: false}``
    every recipe would carry core's "metrics on by default, srt-exporters missing" warning.
    The kit appends it after a recipe's last line, so every line number a test checks stays
    where it is, and only to recipes that do not set ``observability`` themselves.
    """
    return KitSettings(
        srt_mooncake.plugin,
        "srt-mooncake",
        "recipe.yaml",
        local=True,
        job_dir="/jobs/j",
        fill={"observability": {"metrics": False}},
    )


@pytest.fixture
def mooncake() -> dict[str, str]:
    """Mooncake's binaries by name; skips without them, unless the environment says they
    must be there (tox's mooncake and suite environments set SRT_REQUIRE_MOONCAKE=1)."""
    found = {name: needs.venv_script(name) for name in BINARIES}
    if None in found.values():
        needs.missing("needs Mooncake: pip install 'srt-mooncake[server]'", "SRT_REQUIRE_MOONCAKE")
    return {name: path for name, path in found.items() if path is not None}
