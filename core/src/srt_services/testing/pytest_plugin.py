"""pytest fixtures for srt plugin authors.

Enable in a ``conftest.py``::

    pytest_plugins = ["srt_services.testing.pytest_plugin"]

Every fixture works on an isolated plugin set (built-ins only, entry points never scanned),
so a test sees the plugins it registers and nothing else installed in the environment:
results do not depend on which other ``srt-*`` wheels share the venv (pytest #6655 is the
cautionary tale). The contract suites live in :mod:`srt_services.testing.contracts`.

Fixtures:

``srt_kit_settings``
    A :class:`~srt_services.testing.kit.KitSettings`: the plugin under test and how recipes
    are read and planned. Override it in a ``conftest.py``; the fixtures below follow it.
``srt_plugins``
    A fresh ``PluginSet(autoload=False)`` for the test, with the settings' plugin registered.
``srt_register``
    ``srt_register(obj, name=None) -> name``: register a plugin module or object in
    ``srt_plugins`` for this test only (unregistered at teardown, even after a failure).
``srt_hook_recorder``
    A :class:`~srt_services.testing.kit.HookRecorder` on ``srt_plugins``.
``srt_allocation``
    ``srt_allocation(nodes=2, kind="symbolic")``: a fake allocation.
``srt_layout``
    ``srt_layout(nodes=2, gpus_per_node=8, workers_per_node=1)``: a fake job layout.
``srt_instance_context``
    ``srt_instance_context(service="svc", layout=None, node=0)``: what a kind's methods get.
``srt_load``
    ``srt_load(recipe, source=None)``: load a recipe (mapping, YAML text, or a recipe file as a
    ``pathlib.Path``) like ``srt validate``.
``srt_plan``
    ``srt_plan(recipe, nodes=None, local=None, job_dir=None, **more)``: load and plan
    through the application layer in ``srt_plugins``, under the settings' site config
    (``None``: the settings' value; ``more``: ``nodelist``, ``allocation``, ``job_id``,
    ``site``, ``runs_here``, and ``source``, the recipe's file name: its directory is what
    ``{recipe_dir}`` renders to).
``srt_problems`` / ``srt_problem``
    ``srt_problems(recipe, nodes=None)``: the located errors of a recipe ``srt validate``
    refuses; ``srt_problem`` when there must be exactly one.
``srt_free_port``
    ``srt_free_port()``: a port the kernel just gave out, never the same twice in one test.
``srt_jobs``
    A :class:`~srt_services.testing.jobs.Jobs` (``srt run`` on recipe text); every job it
    started is stopped and checked for surviving processes at teardown.
``srt_isolated_env``
    Clears the ``SRT_*`` plugin controls and points ``SRT_SITE_CONFIG`` at an empty file,
    for tests that do create a process-wide plugin set.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from srt_services.testing import kit

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.contracts.allocation import Allocation
    from srt_services.contracts.context import InstanceContext, Layout
    from srt_services.contracts.plan import Plan
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.problems import LocatedProblem
    from srt_services.testing.jobs import Jobs

#: What the loading fixtures take: YAML text, a mapping, or a recipe file's path.
RecipeInput = Mapping[str, Any] | str | os.PathLike[str]

#: Environment variables that change which plugins load.
CONTROL_VARIABLES = (
    "SRT_DISABLE_PLUGIN_AUTOLOAD",
    "SRT_PLUGINS",
    "SRT_DISABLED_PLUGINS",
    "SRT_SITE_CONFIG",
    "SRT_STRICT_PLUGINS",
    "SRT_TRACE_PLUGINS",
)


@pytest.fixture
def srt_kit_settings() -> kit.KitSettings:
    """The defaults: no plugin of your own, symbolic nodes. Override this fixture in your
    ``conftest.py`` to have every kit fixture use your plugin and recipe settings."""
    return kit.KitSettings()


@pytest.fixture
def srt_plugins(srt_kit_settings: kit.KitSettings) -> PluginSet:
    """An isolated plugin set: built-ins only (and the settings' plugin), autoload off."""
    return kit.isolated_plugins(srt_kit_settings.plugin, srt_kit_settings.plugin_name)


@pytest.fixture
def srt_register(srt_plugins: PluginSet) -> Iterator[Callable[..., str]]:
    """Register a plugin for one test; everything registered is undone at teardown."""
    names: list[str] = []

    def register(obj: object, name: str | None = None) -> str:
        registered = srt_plugins.register(obj, name)
        names.append(registered)
        return registered

    yield register
    for name in reversed(names):
        try:
            srt_plugins.unregister(name)
        except (ValueError, KeyError):
            pass


@pytest.fixture
def srt_hook_recorder(srt_plugins: PluginSet) -> Iterator[kit.HookRecorder]:
    """Records every hook call the facade makes on ``srt_plugins``."""
    recorder = kit.HookRecorder(srt_plugins)
    yield recorder
    recorder.close()


@pytest.fixture
def srt_allocation() -> Callable[..., Allocation]:
    return kit.fake_allocation


@pytest.fixture
def srt_layout() -> Callable[..., Layout]:
    return kit.fake_layout


@pytest.fixture
def srt_instance_context() -> Callable[..., InstanceContext]:
    return kit.instance_context


@pytest.fixture
def srt_load(
    srt_plugins: PluginSet, srt_kit_settings: kit.KitSettings
) -> Callable[..., LoadedRecipe]:
    settings = srt_kit_settings

    def load(recipe: RecipeInput, source: str | None = None) -> LoadedRecipe:
        return kit.load(srt_plugins, recipe, source or settings.source, fill=settings.fill)

    return load


@pytest.fixture
def srt_plan(srt_plugins: PluginSet, srt_kit_settings: kit.KitSettings) -> Callable[..., Plan]:
    settings = srt_kit_settings

    def make(
        recipe: RecipeInput,
        nodes: int | None = None,
        local: bool | None = None,
        job_dir: str | None = None,
        **more: Any,
    ) -> Plan:
        """``more``: :func:`~srt_services.testing.kit.plan`'s other keywords (``nodelist``,
        ``allocation``, ``job_id``, ``site``, ``runs_here``, ``local_network``, ``source``)."""
        more.setdefault("site", settings.site)
        more.setdefault("source", settings.source)
        return kit.plan(
            srt_plugins,
            recipe,
            nodes=nodes,
            local=settings.local if local is None else local,
            job_dir=job_dir or settings.job_dir,
            fill=settings.fill,
            **more,
        )

    return make


@pytest.fixture
def srt_problems(
    srt_plugins: PluginSet, srt_kit_settings: kit.KitSettings
) -> Callable[..., list[LocatedProblem]]:
    """``srt_problems(recipe, nodes=None)``: every located error of a recipe that ``srt
    validate`` must refuse (the test fails if it is accepted)."""
    settings = srt_kit_settings

    def problems(recipe: RecipeInput, nodes: int | None = None) -> list[LocatedProblem]:
        return kit.problems(srt_plugins, recipe, nodes, source=settings.source, fill=settings.fill)

    return problems


@pytest.fixture
def srt_problem(
    srt_problems: Callable[..., list[LocatedProblem]], srt_kit_settings: kit.KitSettings
) -> Callable[..., LocatedProblem]:
    """``srt_problem(recipe, nodes=None)``: the one error of a recipe refused with exactly one."""

    def one(recipe: RecipeInput, nodes: int | None = None) -> LocatedProblem:
        found = srt_problems(recipe, nodes)
        assert len(found) == 1, "\n".join(p.render(srt_kit_settings.source) for p in found)
        return found[0]

    return one


@pytest.fixture
def srt_free_port() -> kit.FreePorts:
    """Distinct free ports for one test (see :class:`~srt_services.testing.kit.FreePorts`)."""
    return kit.FreePorts()


@pytest.fixture
def srt_jobs(tmp_path: Path) -> Iterator[Jobs]:
    """``srt run`` on recipe text: ``srt_jobs.run(text, *args, env=None, timeout=60)`` waits
    for it, ``srt_jobs.start(...)`` does not; both return a
    :class:`~srt_services.testing.jobs.JobRun` (``.code``, ``.log(step)``, ``.events()``,
    ``.result()``...). At teardown, every job still running is stopped and none may have
    left a process behind (a test that leaks fails even when its body passed)."""
    from srt_services.testing.jobs import Jobs

    jobs = Jobs(tmp_path)
    yield jobs
    problems = jobs.finish()
    assert not problems, "\n".join(problems)


@pytest.fixture
def srt_isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """No plugin controls from the caller's shell, an empty site config, and a fresh
    process-wide plugin set before and after the test. Yields the site config path (write
    to it to test site rules)."""
    from srt_services import site_config
    from srt_services.plugins import discovery, manager

    for name in CONTROL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    site = tmp_path / "site.toml"
    site.write_text("", encoding="utf-8")
    monkeypatch.setenv("SRT_SITE_CONFIG", str(site))
    site_config._cached.cache_clear()
    discovery.clear_cache()
    manager.reset_default()
    yield site
    site_config._cached.cache_clear()
    discovery.clear_cache()
    manager.reset_default()
