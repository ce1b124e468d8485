"""Test helpers for srt and for plugin authors (extra ``srt-services[testing]``).

For plugin authors, enable the pytest plugin in your ``conftest.py``::

    pytest_plugins = ["srt_services.testing.pytest_plugin"]

and subclass a contract in a test module, overriding its one fixture::

    from srt_services.testing.contracts import KindCase, ServiceKindContract

    class TestMyKind(ServiceKindContract):
        @pytest.fixture
        def kind_case(self) -> KindCase:
            return KindCase(MyKind, entries=[{}, {"options": {"port": 9000}}], plugin=my_plugin)

Modules:

* :mod:`~srt_services.testing.pytest_plugin`: fixtures (an isolated plugin set with autoload
  off and your plugin in it, register-for-one-test, a hook-call recorder, a fake
  allocation/layout/instance context, loader and planner shortcuts, free ports, ``srt run``
  jobs checked for survivors, an isolated SRT_* environment); a ``conftest.py`` sets them
  to its plugin by overriding ``srt_kit_settings``.
* :mod:`~srt_services.testing.contracts`: ``ServiceKindContract``, ``ProbeContract``,
  ``PlacementContract``: the shared suites every kind, probe and placement must pass.
* :mod:`~srt_services.testing.kit`: the same helpers without pytest.
* ``survivors`` and ``jobs`` run real jobs and prove nothing of them is left behind.
* :mod:`~srt_services.testing.netns`: what a test of a job in namespaces mode (a network
  namespace per virtual node) checks: whether this machine can make them, the job's
  network record, and what of it is left.
* :mod:`~srt_services.testing.needs`: skip a test whose server is not installed, or fail it
  where a ``SRT_REQUIRE_*`` variable says it must be.

Everything runs through the real loader, planner and plugin facade, so a plugin that passes
here behaves the same under ``srt dry-run`` and ``srt run``. See ``docs/plugin-authors.md``.

A plugin's tests import nothing of srt but :mod:`srt_services.extend` and this package (a
test in core walks ``plugins/*/tests`` and fails on any other ``srt_services`` import). The
names such a test needs besides the plugin API are importable from here: what a refused
recipe raises (:class:`RecipeError`, its :class:`LocatedProblem`), what a run refused
for another reason raises (:class:`SrtError`), what the kit's fixtures
hand out (:class:`PluginSet`, :class:`LoadedRecipe`, :class:`KitSettings`), and what
:func:`~srt_services.testing.kit.run_cli` returns (:class:`CliResult`). Like
``srt_services.extend`` they are resolved on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.errors import SrtError
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.problems import LocatedProblem, RecipeError
    from srt_services.testing.kit import CliResult, KitSettings

#: public name -> module that defines it
_WHERE: dict[str, str] = {
    "PluginSet": "srt_services.plugins.manager",
    "LoadedRecipe": "srt_services.checking.load",
    "LocatedProblem": "srt_services.recipe.problems",
    "RecipeError": "srt_services.recipe.problems",
    "CliResult": "srt_services.testing.kit",
    "KitSettings": "srt_services.testing.kit",
    "SrtError": "srt_services.errors",
}

__all__ = [
    "CliResult",
    "KitSettings",
    "LoadedRecipe",
    "LocatedProblem",
    "PluginSet",
    "RecipeError",
    "SrtError",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'srt_services.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
