"""The srt plugin-author kit's fixtures (srt_plugins, srt_plan, srt_free_port, ...), set to
this plugin: see "Testing with the kit" in srt's docs/plugin-authors.md."""

import pytest
from srt_services.testing.kit import KitSettings

import {{package}}.plugin

pytest_plugins = ["srt_services.testing.pytest_plugin"]


@pytest.fixture
def srt_kit_settings() -> KitSettings:
    """Only core and this plugin in every test's plugin set, whatever else is installed."""
    return KitSettings({{package}}.plugin, "{{dist}}")
