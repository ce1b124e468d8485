"""Shared fixtures of the core tests: an isolated plugin set and load/plan helpers.

Every helper works on recipe *text* shown as ``recipe.yaml``, so a test reads as the recipe
it checks and asserts the ``line:col`` a user would see. The plugin set has only the
built-ins (``PluginSet(autoload=False)``): installed plugins never change a core test.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.errors import RecipeInvalid
from srt_services.plan.allocation import AllocationRequest
from srt_services.plan.model import Plan
from srt_services.plan.resolve import resolve
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.load import LoadedRecipe, load_recipe
from srt_services.recipe.problems import LocatedProblem, RecipeError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SOURCE = "recipe.yaml"

LoadFn = Callable[..., LoadedRecipe]
PlanFn = Callable[..., Plan]
ProblemsFn = Callable[..., list[LocatedProblem]]
OneFn = Callable[..., LocatedProblem]


def _text(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


@pytest.fixture
def plugins() -> PluginSet:
    """Only the built-ins: kind ``generic``, the core placements, expansions and probes."""
    return PluginSet(autoload=False)


@pytest.fixture
def load(plugins: PluginSet) -> LoadFn:
    """``load(text)``: the dedented text loaded as ``recipe.yaml`` (raises RecipeError)."""

    def _load(text: str, source: str = SOURCE) -> LoadedRecipe:
        return load_recipe(source, plugins, text=_text(text))

    return _load


@pytest.fixture
def plan(plugins: PluginSet) -> PlanFn:
    """``plan(text, nodes=None, nodelist=None)``: load and resolve on symbolic nodes."""

    def _plan(text: str, nodes: int | None = None, nodelist: tuple[str, ...] | None = None) -> Plan:
        loaded = load_recipe(SOURCE, plugins, text=_text(text))
        return resolve(loaded, plugins, AllocationRequest(count=nodes, nodelist=nodelist))

    return _plan


@pytest.fixture
def problems(plugins: PluginSet) -> ProblemsFn:
    """``problems(text, nodes=None)``: every error of a recipe that must fail (load or plan)."""

    def _problems(text: str, nodes: int | None = None) -> list[LocatedProblem]:
        try:
            loaded = load_recipe(SOURCE, plugins, text=_text(text))
            resolve(loaded, plugins, AllocationRequest(count=nodes))
        except RecipeError as exc:
            errors = exc.errors
            rendered = str(exc)
        except RecipeInvalid as exc:  # pragma: no cover - every recipe error is a RecipeError
            pytest.fail(f"RecipeInvalid without positions: {exc}")
        else:
            pytest.fail("the recipe was accepted")
        assert errors, "a RecipeError must carry at least one error"
        assert "Traceback" not in rendered
        for p in errors:
            assert p.render(SOURCE) in rendered
        return errors

    return _problems


@pytest.fixture
def one(problems: ProblemsFn) -> OneFn:
    """``one(text)``: the single error of a recipe that must fail with exactly one."""

    def _one(text: str, nodes: int | None = None) -> LocatedProblem:
        found = problems(text, nodes)
        assert len(found) == 1, "\n".join(p.render(SOURCE) for p in found)
        return found[0]

    return _one


@pytest.fixture
def srt_env(tmp_path: Path) -> dict[str, str]:
    """Environment for ``srt`` subprocesses: no installed plugin, no site config."""
    site = tmp_path / "site.toml"
    site.write_text("# empty site config: no requirements, no lock\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON"))}
    env.update(
        SRT_DISABLE_PLUGIN_AUTOLOAD="1",
        SRT_PLUGINS="",
        SRT_SITE_CONFIG=str(site),
        COLUMNS="200",
        NO_COLOR="1",
    )
    return env


@pytest.fixture
def on_terminal() -> Callable[..., str]:
    """``on_terminal(columns, *args, env=None)``: what ``srt ARGS`` prints on a pseudo-terminal
    that many columns wide (COLUMNS unset, so the terminal's own size counts)."""

    def run(columns: int, *args: str, env: dict[str, str] | None = None) -> str:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
        full = {k: v for k, v in (env or os.environ).items() if k not in ("COLUMNS", "LINES")}
        proc = subprocess.Popen(
            [sys.executable, "-m", "srt_services", *args],
            stdout=slave,
            stderr=slave,
            stdin=subprocess.DEVNULL,
            env=full,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(master)
        proc.wait(60)
        return b"".join(chunks).decode().replace("\r\n", "\n")

    return run


@pytest.fixture
def python() -> str:
    """The interpreter running the tests (the dev venv's)."""
    return sys.executable


@pytest.fixture
def repo() -> Path:
    """The repository root (examples/, docs/, bench/ are below it)."""
    return REPO
