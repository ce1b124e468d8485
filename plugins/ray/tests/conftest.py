"""Fixtures for srt-ray's tests: plans with only this plugin registered, real Ray for the
runtime tests (skipped without it, an error with ``SRT_REQUIRE_RAY=1``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import srt_ray.plugin
from srt_services.extend import Plan
from srt_services.testing import PluginSet, kit, needs

#: A services-only job like the spec's RL pool: no engine, no frontend.
POOL_JOB: dict[str, Any] = {"frontend": {"type": "none"}, "resources": {"gpus_per_node": 4}}


@pytest.fixture
def srt_kit_settings() -> kit.KitSettings:
    """Only core and this plugin: other installed plugins cannot change what is tested."""
    return kit.KitSettings(srt_ray.plugin, "srt-ray")


@pytest.fixture
def plan(srt_plan: Callable[..., Plan]) -> Callable[..., Plan]:
    """``plan(services, **top_level)``: dry-run a recipe with only srt-ray installed."""

    def make(services: list[dict[str, Any]], local: bool = False, **more: Any) -> Plan:
        return srt_plan({**POOL_JOB, **more, "services": services}, local=local)

    return make


@pytest.fixture
def errors(srt_plugins: PluginSet) -> Callable[..., list[str]]:
    """``errors(services, **top_level)``: the rendered problems of a recipe (``[]`` if none)."""

    def check(services: list[dict[str, Any]], **more: Any) -> list[str]:
        return kit.recipe_errors(srt_plugins, {**POOL_JOB, **more, "services": services})

    return check


@pytest.fixture
def ray() -> str:
    """Real Ray for a runtime test (``pip install 'srt-ray[ray]'``)."""
    found = needs.venv_script("ray")
    if found is None:
        needs.missing("needs Ray (pip install 'srt-ray[ray]')", "SRT_REQUIRE_RAY")
    return found
