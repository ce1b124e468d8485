"""Fixtures for srt-mooncake's tests: an isolated plugin set, recipes from text, free ports,
and where Mooncake's binaries are (the runtime tests need the real ones)."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import srt_mooncake.plugin
from srt_services.plan.allocation import AllocationRequest
from srt_services.plan.model import Plan
from srt_services.plan.resolve import resolve
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.load import LoadedRecipe, load_recipe

HERE = Path(__file__).resolve().parent
VENV_BIN = Path(sys.executable).parent


def mooncake_binary(name: str) -> str | None:
    """Where srt would find a Mooncake console script: PATH, then its own venv's bin."""
    found = shutil.which(name)
    if found is None and (VENV_BIN / name).is_file():
        found = str(VENV_BIN / name)
    return found


@pytest.fixture
def mooncake() -> dict[str, str]:
    """Mooncake's binaries by name; skips without them, unless the environment says they
    must be there (tox's mooncake and suite environments set SRT_REQUIRE_MOONCAKE=1)."""
    found = {n: mooncake_binary(n) for n in ("mooncake_master", "mc_store_rest_server")}
    if all(found.values()):
        return {n: p for n, p in found.items() if p is not None}
    if os.environ.get("SRT_REQUIRE_MOONCAKE") == "1":
        pytest.fail("Mooncake is not installed (pip install 'srt-mooncake[server]')")
    pytest.skip("needs Mooncake: pip install 'srt-mooncake[server]'")


@pytest.fixture
def plugins() -> PluginSet:
    """Only core and this plugin: other installed plugins cannot change what is tested."""
    ps = PluginSet(autoload=False)
    ps.register(srt_mooncake.plugin, name="srt-mooncake")
    return ps


@pytest.fixture
def load(plugins: PluginSet) -> Callable[[str], LoadedRecipe]:
    def _load(text: str) -> LoadedRecipe:
        text = textwrap.dedent(text)
        if "observability" not in text:
            # srt-exporters is not in this plugin set: without this line every recipe would
            # carry core's "metrics on by default, srt-exporters missing" warning (appended
            # last, so every line number a test checks stays where it is)
            text = text.rstrip("\n") + "\nobservability: {metrics: false}\n"
        return load_recipe("recipe.yaml", plugins, text=text)

    return _load


@pytest.fixture
def plan(plugins: PluginSet, load: Callable[[str], LoadedRecipe]) -> Callable[..., Plan]:
    def _plan(text: str, local: bool = True) -> Plan:
        request = AllocationRequest(kind="local" if local else "symbolic")
        return resolve(load(text), plugins, request, job_dir="/jobs/j")

    return _plan


@pytest.fixture
def free_port() -> Callable[[], int]:
    """Ports the kernel just handed out, never the same twice in one test. Mooncake's
    metadata server and stores bind 0.0.0.0 whatever they are told, so the fixed defaults
    (8700-8702, 8800) would collide with other sessions on this machine."""
    given: set[int] = set()

    def _free() -> int:
        while True:
            with socket.socket() as s:
                s.bind(("0.0.0.0", 0))
                port = int(s.getsockname()[1])
            if port not in given:
                given.add(port)
                return port

    return _free
