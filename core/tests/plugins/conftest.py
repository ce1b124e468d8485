"""Shared setup for the plugin tests: a temporary site directory of real dummy distributions,
an isolated ``SRT_*`` environment, and ``srt`` run as a subprocess the way users run it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result
from srt_services import site_config
from srt_services.plugins import discovery, manager

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "plugins"
if str(FIXTURES) not in sys.path:
    sys.path.insert(0, str(FIXTURES))

from plugin_site import Site, drop_dummy_modules  # noqa: E402

CONTROLS = (
    "SRT_DISABLE_PLUGIN_AUTOLOAD",
    "SRT_PLUGINS",
    "SRT_DISABLED_PLUGINS",
    "SRT_SITE_CONFIG",
    "SRT_STRICT_PLUGINS",
    "SRT_TRACE_PLUGINS",
)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    """An empty site dir on ``sys.path``, an empty site config, no SRT_* controls."""
    for name in CONTROLS:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "site-packages"
    path.mkdir()
    config = tmp_path / "site.toml"
    config.write_text("", encoding="utf-8")
    log = tmp_path / "imports.log"
    monkeypatch.setenv("SRT_SITE_CONFIG", str(config))
    monkeypatch.setenv("SRT_TEST_IMPORT_LOG", str(log))
    monkeypatch.syspath_prepend(str(path))
    site_config._cached.cache_clear()
    discovery.clear_cache()
    manager.reset_default()
    yield Site(path=path, config=config, import_log=log)
    drop_dummy_modules()
    site_config._cached.cache_clear()
    discovery.clear_cache()
    manager.reset_default()


@pytest.fixture
def plugin_set(site: Site) -> Callable[..., manager.PluginSet]:
    """``plugin_set(SRT_PLUGINS="a")``: a fresh autoloading set over ``site``."""

    def make(**env: str) -> manager.PluginSet:
        full = {k: v for k, v in os.environ.items() if k not in CONTROLS}
        full["SRT_SITE_CONFIG"] = str(site.config)
        full.update(env)
        return manager.PluginSet(env=full, site=site_config.load(str(site.config)))

    return make


@pytest.fixture
def cli(site: Site) -> Callable[..., Result]:
    """Run ``srt plugins ARGS`` in-process (fast); the process-wide plugin set is fresh."""
    from click.testing import CliRunner
    from srt_services.cli.plugin_cmds import plugins

    def invoke(*args: str) -> Result:
        manager.reset_default()
        result = CliRunner().invoke(plugins, list(args), catch_exceptions=False)
        manager.reset_default()
        return result

    return invoke


@pytest.fixture
def run_srt(site: Site) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``srt ARGS`` in a subprocess that sees the site dir, like an installed venv."""

    def run(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
        full = {k: v for k, v in os.environ.items() if k not in CONTROLS}
        full["PYTHONPATH"] = os.pathsep.join(
            [str(site.path), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        full["SRT_SITE_CONFIG"] = str(site.config)
        full["SRT_TEST_IMPORT_LOG"] = str(site.import_log)
        full["COLUMNS"] = "200"
        full.update(env)
        return subprocess.run(
            [sys.executable, "-m", "srt_services", *args],
            check=False,
            capture_output=True,
            text=True,
            env=full,
            cwd=cwd,
            timeout=60,
        )

    return run


@pytest.fixture
def absent_first_party() -> tuple[str, str]:
    """``(kind, distribution)`` of a first-party kind whose plugin is not installed here, for
    the "it is provided by srt-x, which is not installed" advice: which plugins a test
    environment holds differs (the suite installs srt-mooncake, the core environment none)."""
    from importlib import metadata

    for kind, dist in sorted(manager.FIRST_PARTY_KINDS.items()):
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            return kind, dist
    pytest.skip("every first-party plugin is installed in this environment")
