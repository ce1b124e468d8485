"""The typed facade over pluggy: the only way core asks plugins for anything.

A :class:`PluginSet` knows every installed plugin from one metadata scan, imports a plugin
only when one of its capabilities is asked for (a kind named in a recipe, a hook a recipe
needs), and keeps a per-capability registry that records which plugin registered each name
so that a clash can name both owners. A plugin that fails to import, implements a hook this
core does not know, or raises inside a registration hook is quarantined and reported; it
never takes the rest of srt down with it.
"""

from __future__ import annotations

import importlib
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from difflib import get_close_matches
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pluggy

from srt_services import __version__ as CORE_VERSION
from srt_services import hookspecs
from srt_services.errors import PluginError
from srt_services.plugins.discovery import Controls, PluginRecord, normalize, scan

if TYPE_CHECKING:
    import click

    from srt_services.extend.expansion import Expansion
    from srt_services.extend.implied import ImpliedService
    from srt_services.extend.kind import ServiceKind
    from srt_services.extend.launcher import Launcher
    from srt_services.extend.placement import Placement
    from srt_services.extend.probe import Probe
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem

log = logging.getLogger("srt.plugins")

T = TypeVar("T")

BUILTIN = "srt-services (built-in)"

#: capability -> registration hook
REGISTRATION_HOOKS = {
    "kind": "srt_register_service_kinds",
    "placement": "srt_register_placements",
    "expansion": "srt_register_expansions",
    "probe": "srt_register_probes",
    "launcher": "srt_register_launchers",
}


class UnknownName(PluginError):
    """A kind, probe, placement... that no loadable plugin provides."""


@dataclass(slots=True)
class _Registry(Generic[T]):
    capability: str
    items: dict[str, tuple[type[T], str]] = field(default_factory=dict)
    conflicts: dict[str, list[str]] = field(default_factory=dict)
    instances: dict[str, T] = field(default_factory=dict)

    def add(self, cls: type[T], owner: str) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"{owner} registered a {self.capability} class without a name: {cls!r}")
        current = self.items.get(name)
        if current is not None and current[0] is not cls:
            self.conflicts.setdefault(name, [current[1]])
            if owner not in self.conflicts[name]:
                self.conflicts[name].append(owner)
            return
        self.items[name] = (cls, owner)

    def cls(self, name: str) -> type[T] | None:
        if name in self.conflicts:
            owners = " and ".join(self.conflicts[name])
            raise PluginError(
                f"{self.capability} {name!r} is registered by both {owners}; uninstall or block"
                " one of them (SRT_DISABLED_PLUGINS)"
            )
        entry = self.items.get(name)
        return entry[0] if entry else None

    def get(self, name: str) -> T | None:
        entry = self.cls(name)
        if entry is None:
            return None
        inst = self.instances.get(name)
        if inst is None:
            inst = entry()
            self.instances[name] = inst
        return inst

    def owner(self, name: str) -> str | None:
        entry = self.items.get(name)
        return entry[1] if entry else None


class PluginSet:
    """The plugins of one process (or one test), loaded on demand.

    ``autoload=False`` gives an isolated set with only the built-ins and whatever is
    registered explicitly (what the test kit uses).
    """

    def __init__(
        self,
        *,
        autoload: bool = True,
        env: dict[str, str] | None = None,
        site: Any = None,
        builtins: bool = True,
    ) -> None:
        self.pm = pluggy.PluginManager(hookspecs.PROJECT)
        self.pm.add_hookspecs(hookspecs)
        self._trace = (env if env is not None else os.environ).get("SRT_TRACE_PLUGINS") == "1"
        self._registries: dict[str, _Registry[Any]] = {
            cap: _Registry(cap) for cap in REGISTRATION_HOOKS
        }
        self._collected: set[str] = set()
        self._owner_names: dict[str, str] = {}
        self._records: list[PluginRecord] = []
        self._autoload = autoload
        self._site = site
        self._env = env
        self.controls: Controls | None = None
        if builtins:
            from srt_services.plugins import builtin

            self._register(builtin, BUILTIN, BUILTIN)
        if autoload:
            self._discover()

    # ------------------------------------------------------------------ discovery & loading

    def _discover(self) -> None:
        if self._site is None:
            from srt_services import site_config

            self._site = site_config.current()
        self.controls = Controls.from_environment(self._env, self._site)
        self._records = []
        for found in scan():
            record = replace(found, provides=dict(found.provides), hooks=[])
            self.controls.decide(record, CORE_VERSION)
            self._records.append(record)

    @property
    def records(self) -> list[PluginRecord]:
        """Every discovered plugin with its status (only what was decided so far)."""
        return list(self._records)

    def load_all(self) -> None:
        """Import every plugin the controls allow (``srt plugins list`` does this)."""
        for record in self._records:
            if record.status == "discovered":
                self._load(record)

    def _load(self, record: PluginRecord) -> bool:
        started = time.perf_counter()
        try:
            module = importlib.import_module(record.module.partition(":")[0])
            obj: Any = module
            attr = record.module.partition(":")[2]
            if attr:
                for part in attr.split("."):
                    obj = getattr(obj, part)
        except Exception as exc:  # noqa: BLE001 - any import failure is the plugin's, not ours
            record.status = "failed"
            record.error = f"{type(exc).__name__}: {exc}"
            record.reason = "import failed"
            log.warning("plugin %s %s failed to import: %s", record.dist, record.version, record.error)
            self._strict_fail(record)
            return False
        try:
            self._register(obj, record.dist, f"{record.dist} {record.version}")
        except PluginError as exc:
            record.status = "failed"
            record.error = str(exc)
            record.reason = "rejected"
            self._strict_fail(record)
            return False
        record.status = "loaded"
        record.hooks = sorted(
            h.name for h in self.pm.get_hookcallers(obj) or () if h.name.startswith("srt_")
        )
        if self._trace:
            log.warning(
                "srt-trace: loaded %s in %.2f ms", record.dist, (time.perf_counter() - started) * 1e3
            )
        return True

    def _strict_fail(self, record: PluginRecord) -> None:
        if self.controls is not None and self.controls.strict:
            raise PluginError(
                f"plugin {record.dist} {record.version} {record.reason}: {record.error}"
                " (the site config sets plugins.strict)"
            )

    def _register(self, obj: object, name: str, label: str) -> None:
        """Register one plugin object and collect what its registration hooks return."""
        try:
            self.pm.register(obj, name=name)
        except ValueError as exc:
            raise PluginError(f"{label}: {exc}") from None
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{label}: {exc}") from None
        unknown = [
            attr
            for attr in dir(obj)
            if attr.startswith("srt_")
            and callable(getattr(obj, attr))
            and not hasattr(self.pm.hook, attr)
        ]
        if unknown:
            self.pm.unregister(obj)
            known = [h for h in dir(hookspecs) if h.startswith("srt_")]
            hints = []
            for hook in unknown:
                close = get_close_matches(hook, known, n=1)
                hints.append(f"{hook} (did you mean {close[0]}?)" if close else hook)
            raise PluginError(
                f"{label} implements hooks this core does not know: {', '.join(hints)}"
            )
        self._owner_names[name] = label
        try:
            self._collect(name)
        except PluginError:
            self.pm.unregister(obj)
            raise

    def register(self, obj: object, name: str | None = None) -> str:
        """Register an in-process plugin (a module or object with hookimpls); for tests and
        embedding. Returns the name it was registered under."""
        plugin_name = name or getattr(obj, "__name__", None) or repr(obj)
        self._register(obj, plugin_name, plugin_name)
        return plugin_name

    def unregister(self, name: str) -> None:
        """Undo :meth:`register`, dropping everything the plugin registered."""
        self.pm.unregister(name=name)
        label = self._owner_names.pop(name, name)
        self._collected.discard(name)
        for registry in self._registries.values():
            for key, (_, owner) in list(registry.items.items()):
                if owner == label:
                    del registry.items[key]
                    registry.instances.pop(key, None)
            for key, owners in list(registry.conflicts.items()):
                if label in owners:
                    owners.remove(label)
                    if len(owners) <= 1:
                        del registry.conflicts[key]

    def _collect(self, plugin_name: str) -> None:
        if plugin_name in self._collected:
            return
        plugin = self.pm.get_plugin(plugin_name)
        label = self._owner_names.get(plugin_name, plugin_name)
        for capability, hook_name in REGISTRATION_HOOKS.items():
            caller = getattr(self.pm.hook, hook_name)
            for impl in caller.get_hookimpls():
                if impl.plugin is not plugin:
                    continue
                try:
                    classes = impl.function() or []
                except Exception as exc:  # noqa: BLE001
                    raise PluginError(f"{label}: {hook_name} raised {type(exc).__name__}: {exc}") from exc
                for cls in classes:
                    self._registries[capability].add(cls, label)
        self._collected.add(plugin_name)

    # ------------------------------------------------------------------ lazy lookup

    def _ensure(self, capability: str, name: str) -> None:
        registry = self._registries[capability]
        if name in registry.items or name in registry.conflicts:
            return
        for predicate in (
            lambda r: r.declares(capability, name),
            lambda r: not r.declares_anything,
        ):
            for record in self._records:
                if record.status == "discovered" and predicate(record):
                    self._load(record)
            if name in registry.items:
                return

    def _ensure_hook(self, hook_name: str) -> None:
        for record in self._records:
            if record.status == "discovered" and (
                record.declares("hook", hook_name) or not record.declares_anything
            ):
                self._load(record)

    def _unknown(self, capability: str, name: str, noun: str) -> UnknownName:
        registry = self._registries[capability]
        known = sorted(registry.items)
        for record in self._records:
            if record.declares(capability, name) and record.status != "loaded":
                detail = record.reason + (f": {record.error}" if record.error else "")
                return UnknownName(
                    f"{noun} {name!r} comes from plugin {record.dist} {record.version}, which is"
                    f" {record.status} ({detail})"
                )
        hint = ""
        close = get_close_matches(name, known, n=1)
        if close:
            hint = f"; did you mean {close[0]!r}?"
        missing = self.missing_required()
        if missing:
            hint += f"; the site config requires {', '.join(missing)}, which is not installed"
        return UnknownName(f"{noun} {name!r} is not known (known: {', '.join(known)}){hint}")

    def _get(self, capability: str, name: str, noun: str) -> Any:
        self._ensure(capability, name)
        found = self._registries[capability].get(name)
        if found is None:
            raise self._unknown(capability, name, noun)
        return found

    def _all(self, capability: str) -> dict[str, Any]:
        self.load_all()
        registry = self._registries[capability]
        return {name: registry.get(name) for name in sorted(registry.items) if name not in registry.conflicts}

    def owner(self, capability: str, name: str) -> str | None:
        return self._registries[capability].owner(name)

    def names(self, capability: str) -> list[str]:
        """Names registered so far (without loading more plugins)."""
        return sorted(self._registries[capability].items)

    def missing_required(self) -> list[str]:
        """Site-required distributions that are not installed at all."""
        if self.controls is None or not self.controls.require:
            return []
        from packaging.requirements import InvalidRequirement, Requirement

        present = {r.key for r in self._records}
        out = []
        for text in self.controls.require:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                out.append(f"{text} (unreadable requirement)")
                continue
            if normalize(req.name) not in present:
                out.append(text)
        return out

    def check_site_policy(self) -> list[str]:
        """Every way the installed set breaks the site's require/lock rules."""
        problems = [f"{r} is required by the site config but not installed" for r in self.missing_required()]
        for record in self._records:
            if record.status == "incompatible" and ("site" in record.reason or "lock" in record.reason):
                problems.append(f"{record.dist} {record.version}: {record.reason}")
        if self.controls is not None and self.controls.lock is not None:
            present = {r.key for r in self._records}
            for name in self.controls.lock:
                if name not in present:
                    problems.append(f"{name} is in the lock file but not installed")
        return problems

    # ------------------------------------------------------------------ typed accessors

    def kind(self, name: str) -> ServiceKind:
        return self._get("kind", name, "service type")  # type: ignore[no-any-return]

    def kinds(self) -> dict[str, ServiceKind]:
        return self._all("kind")

    def probe(self, name: str) -> Probe:
        return self._get("probe", name, "probe")  # type: ignore[no-any-return]

    def probes(self) -> dict[str, Probe]:
        return self._all("probe")

    def placement(self, name: str) -> Placement:
        return self._get("placement", name, "placement")  # type: ignore[no-any-return]

    def placements(self) -> dict[str, Placement]:
        return self._all("placement")

    def expansion(self, name: str) -> Expansion:
        return self._get("expansion", name, "placement.per value")  # type: ignore[no-any-return]

    def expansions(self) -> dict[str, Expansion]:
        return self._all("expansion")

    def launcher_class(self, name: str) -> type[Launcher]:
        self._ensure("launcher", name)
        found = self._registries["launcher"].cls(name)
        if found is None:
            raise self._unknown("launcher", name, "launcher")
        return found

    def has(self, capability: str, name: str) -> bool:
        self._ensure(capability, name)
        return name in self._registries[capability].items

    # ------------------------------------------------------------------ hook calls

    def _call(self, hook_name: str, **kwargs: Any) -> Iterable[tuple[str, Any]]:
        self._ensure_hook(hook_name)
        caller = getattr(self.pm.hook, hook_name)
        for impl in reversed(caller.get_hookimpls()):
            label = self._owner_names.get(impl.plugin_name, impl.plugin_name)
            args = {k: kwargs[k] for k in impl.argnames if k in kwargs}
            started = time.perf_counter()
            try:
                result = impl.function(**args)
            except Exception as exc:
                raise PluginError(f"plugin {label} failed in {hook_name}: {type(exc).__name__}: {exc}") from exc
            if self._trace:
                log.warning(
                    "srt-trace: %s %s %.2f ms", label, hook_name, (time.perf_counter() - started) * 1e3
                )
            if result is not None:
                yield label, result

    def implied_services(self, recipe: Recipe) -> list[tuple[str, ImpliedService]]:
        """(owner, implied service) pairs, in plugin registration order."""
        out: list[tuple[str, ImpliedService]] = []
        for label, items in self._call("srt_implied_services", recipe=recipe):
            out.extend((label, item) for item in items)
        return out

    def validate_recipe(self, recipe: Recipe) -> list[Problem]:
        out: list[Problem] = []
        for _label, items in self._call("srt_validate_recipe", recipe=recipe):
            out.extend(items)
        return out

    def cli_commands(self) -> dict[str, tuple[str, click.Command]]:
        """Plugin subcommands by name, with the plugin that provides each."""
        out: dict[str, tuple[str, click.Command]] = {}
        for label, commands in self._call("srt_cli_commands"):
            for command in commands:
                name = command.name or ""
                if name in out:
                    raise PluginError(
                        f"command {name!r} is provided by both {out[name][0]} and {label}"
                    )
                out[name] = (label, command)
        return out

    def provided_by(self, owner_label: str) -> dict[str, list[str]]:
        """What a loaded plugin registered, by capability (for ``srt plugins list``)."""
        out: dict[str, list[str]] = {}
        for capability, registry in self._registries.items():
            names = [n for n, (_, o) in registry.items.items() if o == owner_label]
            names += [n for n, owners in registry.conflicts.items() if owner_label in owners]
            if names:
                out[capability] = sorted(set(names))
        return out

    def label_of(self, record: PluginRecord) -> str:
        return f"{record.dist} {record.version}"


_default: PluginSet | None = None


def default_plugins() -> PluginSet:
    """The process-wide plugin set, created on first use (never by ``srt --help``)."""
    global _default
    if _default is None:
        _default = PluginSet()
    return _default


def reset_default(factory: Callable[[], PluginSet] | None = None) -> None:
    """Forget the process-wide set (tests; after changing SRT_* variables)."""
    global _default
    _default = factory() if factory else None


def builtin_module() -> ModuleType:
    from srt_services.plugins import builtin

    return builtin
