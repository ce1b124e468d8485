"""The typed facade over pluggy: the only way core asks plugins for anything.

A :class:`PluginSet` knows every installed plugin from one metadata scan, imports a plugin
only when one of its capabilities is asked for (a kind named in a recipe, a hook a recipe
needs), and keeps a per-capability registry that records which plugin registered each name
so that a clash can name both owners. A plugin that fails to import, implements a hook this
core does not know, or raises inside a registration hook is quarantined and reported; it
never takes the rest of srt down with it.

The work is done by one collaborator per concern, each in its own module:

- :mod:`~srt_services.plugins.registry`: the per-capability registries and their clashes;
- :mod:`~srt_services.plugins.registration`: one plugin object into pluggy and the
  registries (its hooks checked, its registration hooks collected);
- :mod:`~srt_services.plugins.loading`: entry-point records to imported plugins, on
  demand, with quarantine and strict loading;
- :mod:`~srt_services.plugins.calls`: hook calls, one plugin's answer alone, monitors and
  tracing, which plugin raised;
- :mod:`~srt_services.plugins.inventory`: ``srt plugins list`` and the site's rules;
- :mod:`~srt_services.plugins.hints`: the message for a name nobody provides.

This module keeps the typed methods core calls, and the process-wide set.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pluggy

from srt_services import hookspecs
from srt_services.errors import PluginError
from srt_services.plugins import hints, inventory
from srt_services.plugins.calls import HookCall, HookCalls, Monitor
from srt_services.plugins.hints import CORE_EXTRAS, FIRST_PARTY_KINDS, UnknownName
from srt_services.plugins.loading import HOOK_CAPABILITY, Loader, core_plugin, label_of
from srt_services.plugins.registration import Registration
from srt_services.plugins.registry import BUILTIN, REGISTRATION_HOOKS, Registries, Registry

if TYPE_CHECKING:
    import click

    from srt_services.contracts.benchmark import BenchmarkKind
    from srt_services.contracts.engine import Engine
    from srt_services.contracts.expansion import Expansion
    from srt_services.contracts.formats import RecipeFormat
    from srt_services.contracts.implied import ImpliedService
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.probe import Probe
    from srt_services.contracts.report import ReportSection
    from srt_services.contracts.status import StatusSection
    from srt_services.plugins.discovery import Controls, PluginRecord
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem

__all__ = [
    "BUILTIN",
    "CORE_EXTRAS",
    "FIRST_PARTY_KINDS",
    "HOOK_CAPABILITY",
    "REGISTRATION_HOOKS",
    "HookCall",
    "Monitor",
    "PluginSet",
    "UnknownName",
    "default_plugins",
    "reset_default",
    "trace_plugins",
]

T = TypeVar("T")


class PluginSet:
    """The plugins of one process (or one test), loaded on demand.

    ``autoload=False`` gives an isolated set with only the built-ins and whatever is
    registered explicitly (what the test kit uses). ``builtins`` is the core's own plugin
    (:mod:`srt_services.builtin`, which the composition root hands in); ``True`` imports
    it by its name, ``False`` or ``None`` leaves the built-ins out.
    """

    def __init__(
        self,
        *,
        autoload: bool = True,
        env: dict[str, str] | None = None,
        site: Any = None,
        builtins: object = True,
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._calls = HookCalls(self.pm, {})
        self._registries = Registries()
        # the typed registries, read directly by the hot accessors below
        self._kinds = self._registries.kinds
        self._probes = self._registries.probes
        self._placements = self._registries.placements
        self._expansions = self._registries.expansions
        self._launchers = self._registries.launchers
        self._registration = Registration(self._calls, self._registries, self._record_of)
        self._loader = Loader(self._registration, self._registries, self._calls, site=site, env=env)
        if _tracing or (env if env is not None else os.environ).get("SRT_TRACE_PLUGINS") == "1":
            self._calls.start_tracing()
        self._builtin: object | None = core_plugin() if builtins is True else builtins or None
        if self._builtin is not None:
            self._registration.register(self._builtin, BUILTIN, BUILTIN)
        if autoload:
            self._loader.discover()

    def _record_of(self, label: str) -> PluginRecord | None:
        return self._loader.by_label.get(label)

    # ------------------------------------------------------------------ discovery & loading

    @property
    def site(self) -> Any:
        """The site config the controls came from (``None`` for an isolated set)."""
        return self._loader.site

    @property
    def controls(self) -> Controls | None:
        """The plugin controls of the environment and site (``None`` for an isolated set)."""
        return self._loader.controls

    @property
    def records(self) -> list[PluginRecord]:
        """Every discovered plugin with its status (only what was decided so far)."""
        return list(self._loader.records)

    def load_all(self) -> None:
        """Import every plugin the controls allow (``srt plugins list`` does this)."""
        self._loader.load_all()

    def register(self, obj: object, name: str | None = None) -> str:
        """Register an in-process plugin (a module or object with hookimpls); for tests and
        embedding. Returns the name it was registered under."""
        plugin_name = name or getattr(obj, "__name__", None) or repr(obj)
        self._registration.register(obj, plugin_name, plugin_name)
        return plugin_name

    def unregister(self, name: str) -> None:
        """Undo :meth:`register`, dropping everything the plugin registered."""
        self._registration.unregister(name)

    def label_of(self, record: PluginRecord) -> str:
        return label_of(record)

    # ------------------------------------------------------------------ monitoring

    def add_monitor(self, monitor: Monitor) -> Callable[[], None]:
        """Call ``monitor`` after every hook call srt makes; returns the undo."""
        return self._calls.add_monitor(monitor)

    # ------------------------------------------------------------------ registries

    def owner(self, capability: str, name: str) -> str | None:
        return self._registries[capability].owner(name)

    def clashes(self) -> list[tuple[str, str, list[str]]]:
        """(capability, name, owners) for every name two loaded plugins register, sorted;
        such a name is unusable until one of them is blocked or uninstalled."""
        return self._registries.clashes()

    def names(self, capability: str) -> list[str]:
        """Names registered so far (without loading more plugins)."""
        return sorted(self._registries[capability].items)

    def provided_by(self, owner_label: str) -> dict[str, list[str]]:
        """What a loaded plugin registered, by capability (for ``srt plugins list``)."""
        return self._registries.provided_by(owner_label)

    # ------------------------------------------------------------------ typed accessors

    # A hit is answered from the registry's instances at once: a 10,000-service recipe asks
    # for the same few names tens of thousands of times. A miss loads what may provide it.

    def kind(self, name: str) -> ServiceKind:
        return self._kinds.instances.get(name) or self._get(self._kinds, name, "service type")

    def kinds(self) -> dict[str, ServiceKind]:
        return self._all(self._kinds)

    def probe(self, name: str) -> Probe:
        return self._probes.instances.get(name) or self._get(self._probes, name, "probe")

    def probes(self) -> dict[str, Probe]:
        return self._all(self._probes)

    def placement(self, name: str) -> Placement:
        found = self._placements.instances.get(name)
        return found or self._get(self._placements, name, "placement")

    def placements(self) -> dict[str, Placement]:
        return self._all(self._placements)

    def expansion(self, name: str) -> Expansion:
        found = self._expansions.instances.get(name)
        return found or self._get(self._expansions, name, "placement.per value")

    def expansions(self) -> dict[str, Expansion]:
        return self._all(self._expansions)

    def launcher_class(self, name: str) -> type[Launcher]:
        self._loader.ensure(self._launchers, name)
        found = self._launchers.cls(name)
        if found is None:
            raise self._unknown(self._launchers, name, "launcher")
        return found

    def engine(self, name: str) -> Engine:
        engines = self._registries.engines
        return engines.instances.get(name) or self._get(engines, name, "engine (frontend.type)")

    def engines(self) -> dict[str, Engine]:
        return self._all(self._registries.engines)

    def benchmark(self, name: str) -> BenchmarkKind:
        found = self._registries.benchmarks.instances.get(name)
        return found or self._get(self._registries.benchmarks, name, "benchmark.type")

    def benchmarks(self) -> dict[str, BenchmarkKind]:
        return self._all(self._registries.benchmarks)

    def recipe_format(self, name: str) -> RecipeFormat:
        found = self._registries.formats.instances.get(name)
        return found or self._get(self._registries.formats, name, "recipe format")

    def recipe_formats(self) -> dict[str, RecipeFormat]:
        """Every recipe format: a document without ``schema`` is offered to each. Only the
        plugins that declare a format (or declare nothing) are imported for it."""
        self._loader.ensure_capability("format")
        return self._registries.formats.usable()

    def has(self, capability: str, name: str) -> bool:
        registry = self._registries[capability]
        if name in registry.instances:
            return True
        self._loader.ensure(registry, name)
        return registry.has(name)

    def _get(self, registry: Registry[T], name: str, noun: str) -> T:
        self._loader.ensure(registry, name)
        found = registry.get(name)
        if found is None:
            raise self._unknown(registry, name, noun)
        return found

    def _all(self, registry: Registry[T]) -> dict[str, T]:
        self._loader.load_all()
        return registry.usable()

    def _unknown(self, registry: Registry[Any], name: str, noun: str) -> UnknownName:
        records = self._loader.records
        return hints.unknown_name(registry, name, noun, records, self.missing_required())

    # ------------------------------------------------------------------ hook calls

    def _call(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call a hook once every plugin that may implement it is loaded; an exception
        names the plugin whose implementation raised."""
        self._loader.ensure_hook(hook_name)
        return self._calls.call(hook_name, kwargs)

    def implied_services(self, recipe: Recipe) -> list[ImpliedService]:
        """Every implied service, ordered by :attr:`ImpliedService.order` (the spec's order:
        the discovery plane first), ties in pluggy's call order."""
        found = [
            item for items in self._call("srt_implied_services", recipe=recipe) for item in items
        ]
        return sorted(found, key=lambda item: item.order)

    def validate_recipe(self, recipe: Recipe) -> list[Problem]:
        """Every plugin's cross-entry problems, in pluggy's call order."""
        return [p for items in self._call("srt_validate_recipe", recipe=recipe) for p in items]

    def cli_commands(self) -> dict[str, tuple[str, click.Command]]:
        """Plugin subcommands by name, with the plugin that provides each."""
        self._loader.ensure_hook("srt_cli_commands")
        out: dict[str, tuple[str, click.Command]] = {}
        for label, results, error in self._calls.per_plugin("srt_cli_commands", {}):
            if error is not None:
                raise PluginError(
                    f"plugin {label} failed in srt_cli_commands: {type(error).__name__}: {error}"
                ) from error
            for command in (c for commands in results for c in commands):
                name = command.name or ""
                if name in out:
                    raise PluginError(
                        f"command {name!r} is provided by both {out[name][0]} and {label}"
                    )
                out[name] = (label, command)
        return out

    def report_sections(self, job_dir: str) -> list[tuple[str, ReportSection | str]]:
        """Every plugin's report sections with the plugin's label, ordered by
        :attr:`ReportSection.order`; a plugin that failed gives one string instead (why, last),
        so one broken plugin costs the page its part only."""
        return self._sections("srt_report_sections", job_dir)

    def status_sections(self, job_dir: str) -> list[tuple[str, StatusSection | str]]:
        """Every plugin's ``srt status`` sections with the plugin's label, ordered by
        :attr:`StatusSection.order`; a plugin that failed gives one string instead (why,
        last), so one broken plugin costs the output its part only."""
        return self._sections("srt_status_sections", job_dir)

    def _sections(self, hook: str, job_dir: str) -> list[tuple[str, Any]]:
        """What :meth:`report_sections` and :meth:`status_sections` share: each plugin's
        sections of one job, a failure's note (last) in place of a failed plugin's."""
        self._loader.ensure_hook(hook)
        found: list[tuple[str, Any]] = []
        for label, results, error in self._calls.per_plugin(hook, {"job_dir": job_dir}):
            if error is not None:
                found.append((label, f"{type(error).__name__}: {error}"))
                continue
            found.extend((label, section) for sections in results for section in sections)
        # a failure's note goes last: the sections that did draw come first
        return sorted(
            found, key=lambda item: item[1].order if not isinstance(item[1], str) else math.inf
        )

    # ------------------------------------------------------------------ inventory

    def builtin_record(self) -> PluginRecord:
        """The core's own plugin as a record, for ``srt plugins list --all``."""
        return inventory.builtin_record(self._builtin, self._registration)

    def inventory(self, include_builtin: bool = False) -> list[PluginRecord]:
        """Every plugin with its final status: discovery is forced and everything allowed is
        imported (inspection must not depend on what a lazy command happened to load)."""
        builtin = self.builtin_record if include_builtin else None
        return inventory.inventory(self._loader, self._calls, builtin)

    def missing_required(self) -> list[str]:
        """Site-required distributions that are not installed at all."""
        return inventory.missing_required(self._loader.controls, self._loader.records)

    def site_problems(self) -> list[tuple[str, str]]:
        """(plugin, problem) for every site rule the installed set breaks; imports nothing.

        Covers ``plugins.require`` (missing, wrong version, blocked locally, incompatible
        with this core) and ``plugins.lock`` (a plugin missing, added or at another version).
        """
        return inventory.site_problems(self._loader.controls, self._loader.records)


# ---------------------------------------------------------------------- the process's set

_default: PluginSet | None = None
#: ``srt -v``: trace every plugin set of this process, like SRT_TRACE_PLUGINS=1.
_tracing = False


def trace_plugins(on: bool = True) -> None:
    """Log every plugin import and hook call from now on (``srt -v``), the process-wide set
    included if it exists already (a plugin command creates it before ``-v`` is read)."""
    global _tracing
    _tracing = on
    if on and _default is not None:
        _default._calls.start_tracing()


def default_plugins(site: Any = None, builtins: object = True) -> PluginSet:
    """The process-wide plugin set, created on first use (never by ``srt --help``), under
    ``site`` (the site config the composition root read) when given, with ``builtins``
    (see :class:`PluginSet`)."""
    global _default
    if _default is None:
        _default = PluginSet(site=site, builtins=builtins)
    return _default


def reset_default(factory: Callable[[], PluginSet] | None = None) -> None:
    """Forget the process-wide set (tests; after changing SRT_* variables)."""
    global _default
    _default = factory() if factory else None
