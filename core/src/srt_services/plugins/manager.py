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
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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

    from srt_services.contracts.expansion import Expansion
    from srt_services.contracts.implied import ImpliedService
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.probe import Probe
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

#: Hooks whose implementers are found through a capability declaration rather than
#: ``hook.<name>``: a plugin declaring ``command.x`` implements ``srt_cli_commands``.
HOOK_CAPABILITY = {"srt_cli_commands": "command"}

#: Kinds the first-party plugins provide, so a recipe naming one that is not installed is
#: told what to install (Airflow keeps a similar table of its providers).
FIRST_PARTY_KINDS: dict[str, str] = {
    "etcd": "srt-etcd",
    "nats": "srt-nats",
    "oarbank": "srt-oarbank",
    "mooncake-master": "srt-mooncake",
    "mooncake-store": "srt-mooncake",
    "ray": "srt-ray",
    "dcgm-exporter": "srt-exporters",
    "node-exporter": "srt-exporters",
    "process-exporter": "srt-exporters",
    "prometheus": "srt-exporters",
    "lmcache-server": "srt-lmcache",
    "gms": "srt-gms",
}
#: First-party plugins that have a core extra (``srt-services[etcd]``).
CORE_EXTRAS = frozenset({"srt-etcd", "srt-nats", "srt-oarbank", "srt-exporters", "srt-mooncake"})


class UnknownName(PluginError):
    """A kind, probe, placement... that no loadable plugin provides."""


@dataclass(frozen=True, slots=True)
class HookCall:
    """One hook call as pluggy made it, as monitors see it.

    ``plugins`` are the implementations pluggy ran, in the order it ran them; ``result`` is
    what the call returned (for these hooks: the list of non-``None`` results, in that
    order). A registration hook is called for one plugin at a time, so its ``plugins`` has
    one entry.
    """

    hook: str
    plugins: tuple[str, ...]
    kwargs: dict[str, Any]
    result: Any
    error: BaseException | None
    duration: float

    @property
    def plugin(self) -> str:
        """The implementations as one label (one plugin for registration hooks)."""
        return ", ".join(self.plugins)


Monitor = Callable[[HookCall], None]


@dataclass(slots=True)
class _Registry(Generic[T]):
    """Names of one capability to the classes registered under them, with their owners.

    Every registration is kept (not only the first), so unregistering one of two clashing
    plugins leaves the other's class in place.
    """

    capability: str
    entries: dict[str, list[tuple[type[T], str]]] = field(default_factory=dict)
    instances: dict[str, T] = field(default_factory=dict)

    def add(self, cls: type[T], owner: str) -> list[str]:
        """Register ``cls``; return the other owners of its name when it clashes."""
        name = class_name(cls, owner, self.capability)
        found = self.entries.setdefault(name, [])
        if any(c is cls for c, _ in found):
            return []
        others = [o for _, o in found if o != owner]
        found.append((cls, owner))
        self.instances.pop(name, None)
        return others

    @property
    def items(self) -> dict[str, tuple[type[T], str]]:
        return {name: found[0] for name, found in self.entries.items() if found}

    @property
    def conflicts(self) -> dict[str, list[str]]:
        return {
            name: [o for _, o in found] for name, found in self.entries.items() if len(found) > 1
        }

    def has(self, name: str) -> bool:
        return bool(self.entries.get(name))

    def cls(self, name: str) -> type[T] | None:
        found = self.entries.get(name)
        if not found:
            return None
        if len(found) > 1:
            owners = " and ".join(o for _, o in found)
            raise PluginError(
                f"{self.capability} {name!r} is registered by both {owners}; uninstall or block"
                " one of them (SRT_DISABLED_PLUGINS)"
            )
        return found[0][0]

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
        found = self.entries.get(name)
        return found[0][1] if found else None

    def remove_owner(self, owner: str) -> None:
        for name, found in list(self.entries.items()):
            kept = [(c, o) for c, o in found if o != owner]
            if len(kept) != len(found):
                self.instances.pop(name, None)
            if kept:
                self.entries[name] = kept
            else:
                del self.entries[name]


def class_name(cls: Any, owner: str, capability: str) -> str:
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"{owner} registered a {capability} class without a name: {cls!r}")
    return name


def _site_problem(controls: Controls, record: PluginRecord, required: dict[str, str]) -> str | None:
    """What is wrong with one installed plugin under the site's rules, if anything.

    A required plugin not yet looked at is admitted (checked, not imported) first.
    """
    if record.key in required and record.status == "discovered":
        controls.admit(record, CORE_VERSION)
    if record.status == "incompatible" and (record.key in required or "plugins." in record.reason):
        return f"incompatible: {record.reason}"
    if record.key in required and record.status in {"blocked", "not allowed"}:
        return f"required by the site config but {record.status} ({record.reason})"
    return None


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
        # one typed registry per capability; the dict is the same objects, for code that
        # walks every capability (clashes, inventory, unregister)
        self._kinds: _Registry[ServiceKind] = _Registry("kind")
        self._probes: _Registry[Probe] = _Registry("probe")
        self._placements: _Registry[Placement] = _Registry("placement")
        self._expansions: _Registry[Expansion] = _Registry("expansion")
        self._launchers: _Registry[Launcher] = _Registry("launcher")
        self._registries: dict[str, _Registry[Any]] = {
            r.capability: r
            for r in (
                self._kinds,
                self._probes,
                self._placements,
                self._expansions,
                self._launchers,
            )
        }
        self._collected: set[str] = set()
        self._owner_names: dict[str, str] = {}
        self._records: list[PluginRecord] = []
        self._by_label: dict[str, PluginRecord] = {}
        self._monitors: list[Monitor] = []
        self._site = site
        self._env = env
        self.controls: Controls | None = None
        if _tracing or (env if env is not None else os.environ).get("SRT_TRACE_PLUGINS") == "1":
            self._monitors.append(_trace)
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
            record = found.fresh()
            self.controls.decide(record)
            self._records.append(record)

    @property
    def site(self) -> Any:
        """The site config the controls came from (``None`` for an isolated set)."""
        return self._site

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
        if self.controls is not None and not self.controls.admit(record, CORE_VERSION):
            log.warning("plugin %s %s not loaded: %s", record.dist, record.version, record.reason)
            return False
        started = time.perf_counter()
        try:
            module = importlib.import_module(record.module.partition(":")[0])
            obj: Any = module
            attr = record.module.partition(":")[2]
            if attr:
                for part in attr.split("."):
                    obj = getattr(obj, part)
        except Exception as exc:
            record.status = "failed"
            record.error = f"{type(exc).__name__}: {exc}"
            record.reason = "import failed"
            record.traceback = "".join(traceback.format_exception(exc))
            log.warning(
                "plugin %s %s failed to import: %s", record.dist, record.version, record.error
            )
            self._trace_failure(record)
            self._strict_fail(record)
            return False
        label = self.label_of(record)
        self._by_label[label] = record
        try:
            self._register(obj, record.dist, label)
        except PluginError as exc:
            record.status = "failed"
            record.error = str(exc)
            record.reason = "rejected"
            if exc.__cause__ is not None:
                record.traceback = "".join(traceback.format_exception(exc.__cause__))
            log.warning("plugin %s rejected: %s", label, exc)
            self._trace_failure(record)
            self._strict_fail(record)
            return False
        record.status = "loaded"
        record.hooks = sorted(
            h.name for h in self.pm.get_hookcallers(obj) or () if h.name.startswith("srt_")
        )
        record.registered = self.provided_by(label)
        if self._monitors:
            self._notify(
                HookCall("<import>", (label,), {}, obj, None, time.perf_counter() - started)
            )
        return True

    def _trace_failure(self, record: PluginRecord) -> None:
        """Under tracing (SRT_TRACE_PLUGINS=1, ``srt -v``), the failure's traceback too."""
        if record.traceback and _trace in self._monitors:
            log.warning("srt-trace: %s %s:\n%s", record.dist, record.version, record.traceback)

    def _strict_fail(self, record: PluginRecord) -> None:
        if self.controls is not None and self.controls.strict:
            raise PluginError(
                f"plugin {record.dist} {record.version} {record.reason}: {record.error}"
                " (strict plugin loading: plugins.strict in the site config or"
                " SRT_STRICT_PLUGINS=1)"
            )

    def _register(self, obj: object, name: str, label: str) -> None:
        """Register one plugin object and collect what its registration hooks return."""
        unknown, unmarked = self._bad_hooks(obj)
        if unknown or unmarked:
            known = [h for h in dir(hookspecs) if h.startswith("srt_")]
            hints = []
            for hook in unknown:
                close = get_close_matches(hook, known, n=1)
                hints.append(f"{hook} (did you mean {close[0]}?)" if close else hook)
            parts = []
            if hints:
                parts.append(f"implements hooks this core does not know: {', '.join(hints)}")
            if unmarked:
                parts.append(
                    f"defines {', '.join(unmarked)} without @hookimpl (so srt would never call it)"
                )
            raise PluginError(f"{label} {'; '.join(parts)}")
        try:
            self.pm.register(obj, name=name)
        except ValueError as exc:
            raise PluginError(f"{label}: {exc}") from None
        except pluggy.PluginValidationError as exc:
            raise PluginError(f"{label}: {exc}") from None
        self._owner_names[name] = label
        try:
            self._collect(name)
        except PluginError:
            self.pm.unregister(obj)
            self._owner_names.pop(name, None)
            raise

    def _bad_hooks(self, obj: object) -> tuple[list[str], list[str]]:
        """Unknown hook names, and known hooks written without the marker.

        Both are quarantined rather than ignored: pluggy would silently skip them and the
        author would never learn why the hook does not run.
        """
        marker = f"{hookspecs.PROJECT}_impl"
        unknown: list[str] = []
        unmarked: list[str] = []
        for attr in dir(obj):
            if not attr.startswith("srt_"):
                continue
            value = getattr(obj, attr, None)
            if not callable(value) or isinstance(value, type | ModuleType):
                continue
            if not hasattr(self.pm.hook, attr):
                unknown.append(attr)
            elif not isinstance(getattr(value, marker, None), dict):
                unmarked.append(attr)
        return unknown, unmarked

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
            registry.remove_owner(label)

    def _collect(self, plugin_name: str) -> None:
        if plugin_name in self._collected:
            return
        label = self._owner_names.get(plugin_name, plugin_name)
        gathered = self._gather(plugin_name, label)
        if label != BUILTIN:
            self._refuse_builtin_names(label, gathered)
        for capability, cls in gathered:
            others = self._registries[capability].add(cls, label)
            for other in others:
                self._note_conflict(label, other, capability, class_name(cls, label, capability))
        self._collected.add(plugin_name)

    def _gather(self, plugin_name: str, label: str) -> list[tuple[str, type[Any]]]:
        """(capability, class) for what this plugin's registration hooks return."""
        plugin = self.pm.get_plugin(plugin_name)
        others = [p for p in self.pm.get_plugins() if p is not plugin]
        gathered: list[tuple[str, type[Any]]] = []
        for capability, hook_name in REGISTRATION_HOOKS.items():
            # pluggy calls this plugin's implementation (and its own wrappers) alone, so
            # what comes back is known to be this plugin's, and a clash can name it.
            caller = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            if not caller.get_hookimpls():
                continue
            try:
                results = self._run(hook_name, caller, {})
            except Exception as exc:
                raise PluginError(
                    f"{label}: {hook_name} raised {type(exc).__name__}: {exc}"
                ) from exc
            for classes in results:
                if not isinstance(classes, list | tuple):
                    raise PluginError(
                        f"{label}: {hook_name} must return a list of classes, got {classes!r}"
                    )
                gathered.extend((capability, cls) for cls in classes)
        return gathered

    def _refuse_builtin_names(self, label: str, gathered: list[tuple[str, type[Any]]]) -> None:
        """Refuse, before anything is registered, a plugin that reuses a built-in's name."""
        for capability, cls in gathered:
            name = class_name(cls, label, capability)
            registry = self._registries[capability]
            owner = registry.owner(name)
            if owner == BUILTIN and registry.items[name][0] is not cls:
                raise PluginError(
                    f"{label} registers {capability} {name!r}, which {BUILTIN} already"
                    " provides; a built-in name cannot be replaced, so pick another name"
                )

    def _note_conflict(self, label: str, other: str, capability: str, name: str) -> None:
        log.warning("%s %r is registered by both %s and %s", capability, name, other, label)
        mine = self._by_label.get(label)
        theirs = self._by_label.get(other)
        for record, peer in ((mine, other), (theirs, label)):
            if record is not None:
                problem = f"{capability} {name!r} is also registered by {peer}"
                record.problems.append(problem)
                record.clashes.append(problem)

    # ------------------------------------------------------------------ monitoring

    def add_monitor(self, monitor: Monitor) -> Callable[[], None]:
        """Call ``monitor`` after every hook call srt makes; returns the undo."""
        self._monitors.append(monitor)

        def undo() -> None:
            if monitor in self._monitors:
                self._monitors.remove(monitor)

        return undo

    def _notify(self, call: HookCall) -> None:
        for monitor in list(self._monitors):
            monitor(call)

    def _run(self, hook_name: str, caller: Any, kwargs: dict[str, Any]) -> list[Any]:
        """Call ``caller`` (a pluggy hook caller) with ``kwargs``; tell the monitors."""
        if not self._monitors:
            return list(caller(**kwargs))
        labels = tuple(
            self._owner_names.get(impl.plugin_name, impl.plugin_name)
            for impl in reversed(caller.get_hookimpls())
        )
        started = time.perf_counter()
        try:
            result = list(caller(**kwargs))
        except Exception as exc:
            self._notify(
                HookCall(hook_name, labels, kwargs, None, exc, time.perf_counter() - started)
            )
            raise
        self._notify(
            HookCall(hook_name, labels, kwargs, result, None, time.perf_counter() - started)
        )
        return result

    # ------------------------------------------------------------------ lazy lookup

    def _ensure(self, capability: str, name: str) -> None:
        # Every plugin that declares the name is loaded, even when the name is known
        # already, so that a clash is reported the same way whatever was loaded before.
        for record in self._records:
            if record.status == "discovered" and record.declares(capability, name):
                self._load(record)
        if self._registries[capability].has(name):
            return
        for record in self._records:
            if record.status == "discovered" and not record.declares_anything:
                self._load(record)

    def _ensure_hook(self, hook_name: str) -> None:
        capability = HOOK_CAPABILITY.get(hook_name)
        for record in self._records:
            if record.status != "discovered":
                continue
            if (
                record.declares("hook", hook_name)
                or not record.declares_anything
                or (capability is not None and record.provides.get(capability))
            ):
                self._load(record)

    def _unknown(self, capability: str, name: str, noun: str) -> UnknownName:
        registry = self._registries[capability]
        known = sorted(registry.items)
        for record in self._records:
            if not record.declares(capability, name):
                continue
            if record.status != "loaded":
                detail = record.reason + (f": {record.error}" if record.error else "")
                return UnknownName(
                    f"{noun} {name!r} comes from plugin {record.dist} {record.version}, which is"
                    f" {record.status} ({detail})"
                )
            return UnknownName(
                f"{noun} {name!r} is declared by plugin {record.dist} {record.version}"
                f" (srt.provides {capability}.{name}) but the plugin did not register it"
            )
        # names installed plugins declare but that nobody asked for yet (so not imported)
        # are as known as registered ones, and first-party kinds that are not installed are
        # worth a hint: a typo of either gets "did you mean"
        known = sorted(
            {
                *known,
                *(
                    n
                    for r in self._records
                    if r.status in {"discovered", "loaded"}
                    for n in r.provides.get(capability, ())
                    if not registry.conflicts.get(n)
                ),
            }
        )
        installed = {r.key for r in self._records}
        missing = (
            [k for k, d in FIRST_PARTY_KINDS.items() if normalize(d) not in installed]
            if capability == "kind"
            else []
        )
        hints: list[str] = []
        close = get_close_matches(name, [*known, *(m for m in missing if m not in known)], n=1)
        wanted = close[0] if close else name
        where = ""
        if wanted in missing:
            dist = FIRST_PARTY_KINDS[wanted]
            how = (
                f"pip install 'srt-services[{dist.removeprefix('srt-')}]'"
                if dist in CORE_EXTRAS
                else f"pip install {dist}"
            )
            where = f"provided by {dist}, which is not installed: {how}"
        if wanted != name:
            hints.append(f"did you mean {wanted!r}?" + (f" ({where})" if where else ""))
        elif where:
            hints.append(f"it is {where}")
        silent = [
            f"{r.dist} {r.version} ({r.status}: {r.reason})"
            for r in self._records
            if not r.declares_anything and r.status not in {"loaded", "discovered"}
        ]
        if silent:
            hints.append(
                "these plugins were not loaded and do not declare what they provide, so one of"
                f" them may be the source: {', '.join(silent)}"
            )
        missing = self.missing_required()
        if missing:
            hints.append(f"the site config requires {', '.join(missing)}, which is not installed")
        tail = "; " + "; ".join(hints) if hints else ""
        return UnknownName(f"{noun} {name!r} is not known (known: {', '.join(known)}){tail}")

    def _get(self, registry: _Registry[T], name: str, noun: str) -> T:
        self._ensure(registry.capability, name)
        found = registry.get(name)
        if found is None:
            raise self._unknown(registry.capability, name, noun)
        return found

    def _all(self, capability: str) -> dict[str, Any]:
        self.load_all()
        registry = self._registries[capability]
        conflicts = registry.conflicts
        return {
            name: registry.get(name) for name in sorted(registry.items) if name not in conflicts
        }

    def owner(self, capability: str, name: str) -> str | None:
        return self._registries[capability].owner(name)

    def clashes(self) -> list[tuple[str, str, list[str]]]:
        """(capability, name, owners) for every name two loaded plugins register, sorted;
        such a name is unusable until one of them is blocked or uninstalled."""
        return sorted(
            (capability, name, sorted(owners))
            for capability, registry in self._registries.items()
            for name, owners in registry.conflicts.items()
        )

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

    def site_problems(self) -> list[tuple[str, str]]:
        """(plugin, problem) for every site rule the installed set breaks; imports nothing.

        Covers ``plugins.require`` (missing, wrong version, blocked locally, incompatible
        with this core) and ``plugins.lock`` (a plugin missing, added or at another version).
        """
        controls = self.controls
        if controls is None:
            return []
        from packaging.requirements import InvalidRequirement, Requirement

        out: list[tuple[str, str]] = []
        required: dict[str, str] = {}
        for text in controls.require:
            try:
                required[normalize(Requirement(text).name)] = text
            except InvalidRequirement:
                out.append((text, "unreadable requirement in plugins.require"))
        present = {r.key for r in self._records}
        for key, text in required.items():
            if key not in present:
                out.append((key, f"required by the site config ({text!r}) but not installed"))
        for record in self._records:
            problem = _site_problem(controls, record, required)
            if problem is not None:
                out.append((f"{record.dist} {record.version}", problem))
        if controls.lock is not None:
            out.extend(
                (name, f"in the lock file {controls.lock_path} but not installed")
                for name in controls.lock
                if name not in present
            )
        return out

    # ------------------------------------------------------------------ typed accessors

    # A hit is answered from the registry's instances at once: a 10,000-service recipe asks
    # for the same few names tens of thousands of times. A miss loads what may provide it.

    def kind(self, name: str) -> ServiceKind:
        return self._kinds.instances.get(name) or self._get(self._kinds, name, "service type")

    def kinds(self) -> dict[str, ServiceKind]:
        return self._all("kind")

    def probe(self, name: str) -> Probe:
        return self._probes.instances.get(name) or self._get(self._probes, name, "probe")

    def probes(self) -> dict[str, Probe]:
        return self._all("probe")

    def placement(self, name: str) -> Placement:
        found = self._placements.instances.get(name)
        return found or self._get(self._placements, name, "placement")

    def placements(self) -> dict[str, Placement]:
        return self._all("placement")

    def expansion(self, name: str) -> Expansion:
        found = self._expansions.instances.get(name)
        return found or self._get(self._expansions, name, "placement.per value")

    def expansions(self) -> dict[str, Expansion]:
        return self._all("expansion")

    def launcher_class(self, name: str) -> type[Launcher]:
        self._ensure("launcher", name)
        found = self._launchers.cls(name)
        if found is None:
            raise self._unknown("launcher", name, "launcher")
        return found

    def has(self, capability: str, name: str) -> bool:
        registry = self._registries[capability]
        if name in registry.instances:
            return True
        self._ensure(capability, name)
        return registry.has(name)

    # ------------------------------------------------------------------ hook calls

    def _call(self, hook_name: str, **kwargs: Any) -> list[Any]:
        """Call a hook through pluggy: its results in pluggy's order, ``None`` skipped.

        pluggy runs ``tryfirst`` implementations first, then the others from the most
        recently registered to the first, then ``trylast`` ones; wrappers (``wrapper=True``)
        wrap the whole call. An exception names the plugin whose implementation raised.
        """
        self._ensure_hook(hook_name)
        caller = getattr(self.pm.hook, hook_name)
        try:
            return self._run(hook_name, caller, kwargs)
        except Exception as exc:
            label = self._raiser(caller, exc)
            raise PluginError(
                f"plugin {label} failed in {hook_name}: {type(exc).__name__}: {exc}"
            ) from exc

    def _per_plugin(
        self, hook_name: str, **kwargs: Any
    ) -> Iterator[tuple[str, list[Any], BaseException | None]]:
        """Each plugin's answer on its own, through pluggy's subset calling, for hooks whose
        results must be attributed (a command to the plugin that provides it)."""
        self._ensure_hook(hook_name)
        for impl in reversed(getattr(self.pm.hook, hook_name).get_hookimpls()):
            label = self._owner_names.get(impl.plugin_name, impl.plugin_name)
            others = [p for p in self.pm.get_plugins() if p is not impl.plugin]
            caller = self.pm.subset_hook_caller(hook_name, remove_plugins=others)
            try:
                yield label, self._run(hook_name, caller, kwargs), None
            except Exception as exc:
                yield label, [], exc

    def _raiser(self, caller: Any, exc: BaseException) -> str:
        """The plugin whose implementation raised ``exc`` (innermost frame wins)."""
        codes = {}
        for impl in caller.get_hookimpls():
            code = getattr(impl.function, "__code__", None)
            if code is not None:
                codes[code] = self._owner_names.get(impl.plugin_name, impl.plugin_name)
        found = "?"
        tb = exc.__traceback__
        while tb is not None:
            found = codes.get(tb.tb_frame.f_code, found)
            tb = tb.tb_next
        return found

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
        out: dict[str, tuple[str, click.Command]] = {}
        for label, results, error in self._per_plugin("srt_cli_commands"):
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

    def provided_by(self, owner_label: str) -> dict[str, list[str]]:
        """What a loaded plugin registered, by capability (for ``srt plugins list``)."""
        out: dict[str, list[str]] = {}
        for capability, registry in self._registries.items():
            names = [
                n
                for n, found in registry.entries.items()
                if any(o == owner_label for _, o in found)
            ]
            if names:
                out[capability] = sorted(set(names))
        return out

    def label_of(self, record: PluginRecord) -> str:
        return f"{record.dist} {record.version}"

    # ------------------------------------------------------------------ inventory

    def builtin_record(self) -> PluginRecord:
        """The core's own plugin as a record, for ``srt plugins list --all``."""
        from srt_services.plugins import builtin

        location = os.path.dirname(os.path.dirname(os.path.dirname(builtin.__file__ or "?")))
        record = PluginRecord(
            dist="srt-services",
            version=CORE_VERSION,
            entry_name="builtin",
            module=builtin.__name__,
            location=location,
            status="loaded",
            reason="built in",
            metadata_read=True,
        )
        if self.pm.get_plugin(BUILTIN) is not None:
            record.hooks = sorted(
                h.name for h in self.pm.get_hookcallers(builtin) or () if h.name.startswith("srt_")
            )
        record.registered = self.provided_by(BUILTIN)
        return record

    def inventory(self, include_builtin: bool = False) -> list[PluginRecord]:
        """Every plugin with its final status: discovery is forced and everything allowed is
        imported (inspection must not depend on what a lazy command happened to load)."""
        self.load_all()
        for record in self._records:
            record.read_metadata()
        commands: dict[str, list[str]] = {}
        for label, results, error in self._per_plugin("srt_cli_commands"):
            owner_record = self._by_label.get(label)
            if error is not None:
                if owner_record is not None:
                    owner_record.problems.append(
                        f"srt_cli_commands raised {type(error).__name__}: {error}"
                    )
                continue
            for command in (c for result in results for c in result or ()):
                commands.setdefault(label, []).append(getattr(command, "name", None) or "?")
        out: list[tuple[str, PluginRecord]] = []
        if include_builtin:
            out.append((BUILTIN, self.builtin_record()))
        out.extend((self.label_of(r), r) for r in self._records)
        for label, record in out:
            if label in commands:
                record.registered["command"] = sorted(commands[label])
        return [record for _, record in out]


def _trace(call: HookCall) -> None:
    status = f"raised {type(call.error).__name__}" if call.error is not None else "ok"
    log.warning("srt-trace: %s %s %s %.2f ms", call.plugin, call.hook, status, call.duration * 1e3)


_default: PluginSet | None = None
#: ``srt -v``: trace every plugin set of this process, like SRT_TRACE_PLUGINS=1.
_tracing = False


def trace_plugins(on: bool = True) -> None:
    """Log every plugin import and hook call from now on (``srt -v``), the process-wide set
    included if it exists already (a plugin command creates it before ``-v`` is read)."""
    global _tracing
    _tracing = on
    if on and _default is not None and _trace not in _default._monitors:
        _default._monitors.append(_trace)


def default_plugins(site: Any = None) -> PluginSet:
    """The process-wide plugin set, created on first use (never by ``srt --help``), under
    ``site`` (the site config the composition root read) when given."""
    global _default
    if _default is None:
        _default = PluginSet(site=site)
    return _default


def reset_default(factory: Callable[[], PluginSet] | None = None) -> None:
    """Forget the process-wide set (tests; after changing SRT_* variables)."""
    global _default
    _default = factory() if factory else None
