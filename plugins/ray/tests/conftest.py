"""Fixtures for srt-ray's tests: plans with only this plugin registered, real Ray for the
runtime tests (skipped without it, an error with ``SRT_REQUIRE_RAY=1``)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import srt_ray.plugin
from srt_services.plan.model import Plan
from srt_services.testing.jobs import Jobs

#: A services-only job like the spec's RL pool: no engine, no frontend.
POOL_JOB: dict[str, Any] = {"frontend": {"type": "none"}, "resources": {"gpus_per_node": 4}}


@pytest.fixture
def plan(srt_register: Callable[..., str], srt_plan: Callable[..., Plan]) -> Callable[..., Plan]:
    """``plan(services, **top_level)``: dry-run a recipe with only srt-ray installed."""
    srt_register(srt_ray.plugin, "srt-ray")

    def make(services: list[dict[str, Any]], local: bool = False, **more: Any) -> Plan:
        return srt_plan({**POOL_JOB, **more, "services": services}, local=local)

    return make


@pytest.fixture
def errors(srt_register: Callable[..., str], srt_plugins: Any) -> Callable[..., list[str]]:
    """``errors(services, **top_level)``: the rendered problems of a recipe (``[]`` if none)."""
    from srt_services.testing import kit

    srt_register(srt_ray.plugin, "srt-ray")

    def check(services: list[dict[str, Any]], **more: Any) -> list[str]:
        return kit.recipe_errors(srt_plugins, {**POOL_JOB, **more, "services": services})

    return check


def ray_binary() -> str | None:
    """Ray's CLI the way the kind finds it: PATH, then the bin directory of this Python."""
    found = shutil.which("ray")
    if found:
        return found
    beside = Path(sys.executable).parent / "ray"
    return str(beside) if beside.exists() else None


@pytest.fixture
def ray() -> str:
    """Real Ray for a runtime test (``pip install 'srt-ray[ray]'``)."""
    found = ray_binary()
    if found is None:
        if os.environ.get("SRT_REQUIRE_RAY") == "1":
            pytest.fail("Ray is required (SRT_REQUIRE_RAY=1) but `ray` is not installed")
        pytest.skip("needs Ray (pip install 'srt-ray[ray]')")
    return found


@pytest.fixture
def jobs(tmp_path: Path) -> Iterator[Jobs]:
    """``srt run`` jobs; at teardown, nothing of any of them may still run."""
    j = Jobs(tmp_path)
    yield j
    problems = j.finish()
    assert not problems, "\n".join(problems)
