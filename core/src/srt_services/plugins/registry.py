"""What the plugins registered: per capability, each name's classes and their owners.

Every registration is kept (not only the first), so a name two plugins register is a clash
that names both owners, and unregistering one of them leaves the other's class in place.
Nothing here calls a hook or imports a plugin: the registries are filled by
:mod:`srt_services.plugins.registration` and read by the facade.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from srt_services.errors import PluginError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from srt_services.contracts.benchmark import BenchmarkKind
    from srt_services.contracts.engine import Engine
    from srt_services.contracts.expansion import Expansion
    from srt_services.contracts.formats import RecipeFormat
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.probe import Probe

T = TypeVar("T")

#: The owner label of the core's own plugin (the built-ins).
BUILTIN = "srt-services (built-in)"

#: capability -> registration hook
REGISTRATION_HOOKS = {
    "kind": "srt_register_service_kinds",
    "placement": "srt_register_placements",
    "expansion": "srt_register_expansions",
    "probe": "srt_register_probes",
    "launcher": "srt_register_launchers",
    "engine": "srt_register_engines",
    "benchmark": "srt_register_benchmarks",
    "format": "srt_register_recipe_formats",
}


def class_name(cls: Any, owner: str, capability: str) -> str:
    """The name a registered class is known by (its ``name`` attribute)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise PluginError(f"{owner} registered a {capability} class without a name: {cls!r}")
    return name


@dataclass(slots=True)
class Registry(Generic[T]):
    """Names of one capability to the classes registered under them, with their owners.

    ``instances`` holds the one instance of each usable name, made on first use.
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

    def usable(self) -> dict[str, T]:
        """Every name that does not clash, with its instance, sorted by name."""
        conflicts = self.conflicts
        out: dict[str, T] = {}
        for name in sorted(self.items):
            if name not in conflicts:
                inst = self.get(name)
                assert inst is not None
                out[name] = inst
        return out

    def owner(self, name: str) -> str | None:
        found = self.entries.get(name)
        return found[0][1] if found else None

    def owned_by(self, owner: str) -> list[str]:
        """The names ``owner`` registered, sorted."""
        return sorted(n for n, found in self.entries.items() if any(o == owner for _, o in found))

    def remove_owner(self, owner: str) -> None:
        for name, found in list(self.entries.items()):
            kept = [(c, o) for c, o in found if o != owner]
            if len(kept) != len(found):
                self.instances.pop(name, None)
            if kept:
                self.entries[name] = kept
            else:
                del self.entries[name]


#: (capability, name, the other owner) of one registration that clashes
Clash = tuple[str, str, str]


class Registries:
    """One typed registry per capability, and what spans them: what an owner registered,
    every clash, refusing a built-in's name to anyone else."""

    __slots__ = (
        "benchmarks",
        "by_capability",
        "engines",
        "expansions",
        "formats",
        "kinds",
        "launchers",
        "placements",
        "probes",
    )

    def __init__(self) -> None:
        self.kinds: Registry[ServiceKind] = Registry("kind")
        self.probes: Registry[Probe] = Registry("probe")
        self.placements: Registry[Placement] = Registry("placement")
        self.expansions: Registry[Expansion] = Registry("expansion")
        self.launchers: Registry[Launcher] = Registry("launcher")
        self.engines: Registry[Engine] = Registry("engine")
        self.benchmarks: Registry[BenchmarkKind] = Registry("benchmark")
        self.formats: Registry[RecipeFormat] = Registry("format")
        #: the same objects, for code that walks every capability
        self.by_capability: dict[str, Registry[Any]] = {
            r.capability: r
            for r in (
                self.kinds,
                self.probes,
                self.placements,
                self.expansions,
                self.launchers,
                self.engines,
                self.benchmarks,
                self.formats,
            )
        }

    def __getitem__(self, capability: str) -> Registry[Any]:
        return self.by_capability[capability]

    def __iter__(self) -> Iterator[Registry[Any]]:
        return iter(self.by_capability.values())

    def add(self, owner: str, gathered: list[tuple[str, type[Any]]]) -> list[Clash]:
        """Register what ``owner``'s registration hooks returned; return the clashes."""
        clashes: list[Clash] = []
        for capability, cls in gathered:
            for other in self[capability].add(cls, owner):
                clashes.append((capability, class_name(cls, owner, capability), other))
        return clashes

    def refuse_builtin_names(self, owner: str, gathered: list[tuple[str, type[Any]]]) -> None:
        """Refuse, before anything is registered, a plugin that reuses a built-in's name."""
        for capability, cls in gathered:
            name = class_name(cls, owner, capability)
            registry = self[capability]
            if registry.owner(name) == BUILTIN and registry.items[name][0] is not cls:
                raise PluginError(
                    f"{owner} registers {capability} {name!r}, which {BUILTIN} already"
                    " provides; a built-in name cannot be replaced, so pick another name"
                )

    def remove_owner(self, owner: str) -> None:
        for registry in self:
            registry.remove_owner(owner)

    def provided_by(self, owner: str) -> dict[str, list[str]]:
        """What ``owner`` registered, by capability (for ``srt plugins list``)."""
        out: dict[str, list[str]] = {}
        for registry in self:
            names = registry.owned_by(owner)
            if names:
                out[registry.capability] = names
        return out

    def clashes(self) -> list[tuple[str, str, list[str]]]:
        """(capability, name, owners) for every name two plugins register, sorted."""
        return sorted(
            (registry.capability, name, sorted(owners))
            for registry in self
            for name, owners in registry.conflicts.items()
        )
