"""Fixtures for srt-gms's tests: an isolated plugin set and recipes from text."""

from __future__ import annotations

import textwrap
from collections.abc import Callable

import pytest
import srt_gms.plugin
from srt_services.plan.allocation import AllocationRequest
from srt_services.plan.model import Plan
from srt_services.plan.resolve import resolve
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.load import LoadedRecipe, load_recipe


@pytest.fixture
def plugins() -> PluginSet:
    """Only core and this plugin: other installed plugins cannot change what is tested."""
    ps = PluginSet(autoload=False)
    ps.register(srt_gms.plugin, name="srt-gms")
    return ps


@pytest.fixture
def load(plugins: PluginSet) -> Callable[[str], LoadedRecipe]:
    def _load(text: str) -> LoadedRecipe:
        return load_recipe("recipe.yaml", plugins, text=textwrap.dedent(text))

    return _load


@pytest.fixture
def plan(plugins: PluginSet, load: Callable[[str], LoadedRecipe]) -> Callable[..., Plan]:
    def _plan(text: str, local: bool = True, nodes: int | None = None) -> Plan:
        request = AllocationRequest(kind="local" if local else "symbolic", count=nodes)
        return resolve(load(text), plugins, request, job_dir="/jobs/j")

    return _plan
