"""The plugin set's lookups, memoised for one check or plan run."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srt_services.extend.expansion import Expansion
    from srt_services.extend.implied import ImpliedService
    from srt_services.extend.kind import ServiceKind
    from srt_services.extend.placement import Placement
    from srt_services.extend.probe import Probe
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem


class CachedPlugins:
    """The :class:`PluginSet` lookups that a check or plan run repeats, memoised.

    A 10,000-service recipe asks for the same kind, probe, placement and expansion tens of
    thousands of times; the plugin set cannot change during one run, so each answer is kept.
    One dict per capability and a hit returned straight from it: these run several times
    per service, so each level of indirection shows in a large recipe's check time.
    """

    __slots__ = ("_expansions", "_has", "_kinds", "_placements", "_probes", "plugins")

    def __init__(self, plugins: PluginSet) -> None:
        self.plugins = plugins
        self._has: dict[tuple[str, str], bool] = {}
        self._kinds: dict[str, ServiceKind] = {}
        self._probes: dict[str, Probe] = {}
        self._placements: dict[str, Placement] = {}
        self._expansions: dict[str, Expansion] = {}

    def has(self, capability: str, name: str) -> bool:
        key = (capability, name)
        found = self._has.get(key)
        if found is None:
            found = self._has[key] = self.plugins.has(capability, name)
        return found

    def kind(self, name: str) -> ServiceKind:
        found = self._kinds.get(name)
        if found is None:
            found = self._kinds[name] = self.plugins.kind(name)  # raises for an unknown name
        return found

    def probe(self, name: str) -> Probe:
        found = self._probes.get(name)
        if found is None:
            found = self._probes[name] = self.plugins.probe(name)
        return found

    def placement(self, name: str) -> Placement:
        found = self._placements.get(name)
        if found is None:
            found = self._placements[name] = self.plugins.placement(name)
        return found

    def expansion(self, name: str) -> Expansion:
        found = self._expansions.get(name)
        if found is None:
            found = self._expansions[name] = self.plugins.expansion(name)
        return found

    # asked once per run: passed through

    def probes(self) -> dict[str, Probe]:
        return self.plugins.probes()

    def placements(self) -> dict[str, Placement]:
        return self.plugins.placements()

    def expansions(self) -> dict[str, Expansion]:
        return self.plugins.expansions()

    def implied_services(self, recipe: Recipe) -> list[tuple[str, ImpliedService]]:
        return self.plugins.implied_services(recipe)

    def validate_recipe(self, recipe: Recipe) -> list[Problem]:
        return self.plugins.validate_recipe(recipe)
