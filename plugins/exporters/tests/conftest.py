"""Fixtures for srt-exporters' tests: an isolated plugin set, recipes from text, jobs."""

from __future__ import annotations

import socket
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import srt_exporters.plugin
from srt_services.plan.allocation import AllocationRequest
from srt_services.plan.model import Plan
from srt_services.plan.resolve import resolve
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.load import LoadedRecipe, load_recipe
from srt_services.testing.jobs import Jobs

HERE = Path(__file__).resolve().parent


@pytest.fixture
def plugins() -> PluginSet:
    """Only core and this plugin: other installed plugins cannot change what is tested."""
    ps = PluginSet(autoload=False)
    ps.register(srt_exporters.plugin, name="srt-exporters")
    return ps


@pytest.fixture
def load(plugins: PluginSet) -> Callable[[str], LoadedRecipe]:
    def _load(text: str) -> LoadedRecipe:
        return load_recipe("recipe.yaml", plugins, text=textwrap.dedent(text))

    return _load


@pytest.fixture
def plan(plugins: PluginSet, load: Callable[[str], LoadedRecipe]) -> Callable[..., Plan]:
    def _plan(text: str, nodes: int | None = None) -> Plan:
        request = AllocationRequest(kind="local", count=nodes)
        return resolve(load(text), plugins, request, job_dir="/jobs/j")

    return _plan


@pytest.fixture
def free_port() -> Callable[[], int]:
    """Ports the kernel just handed out, never the same twice in one test."""
    given: set[int] = set()

    def _free() -> int:
        while True:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in given:
                given.add(port)
                return port

    return _free


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    """``srt run`` on recipe text; every job is checked for survivors at teardown."""
    j = Jobs(tmp_path)
    yield j
    problems = j.finish()
    assert not problems, "\n".join(problems)
