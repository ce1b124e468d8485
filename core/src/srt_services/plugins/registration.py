"""Registering one plugin object: its hooks checked, the object handed to pluggy, what its
registration hooks return collected into the registries, clashes noted on both plugins.

A plugin whose hooks are unknown or unmarked, whose registration hook raises or returns
something other than classes, or that reuses a built-in's name is refused with a
:class:`~srt_services.errors.PluginError` and leaves nothing registered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from difflib import get_close_matches
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pluggy

from srt_services import hookspecs
from srt_services.errors import PluginError
from srt_services.plugins.guard import PluginEscaped, plugin_code
from srt_services.plugins.registry import BUILTIN, REGISTRATION_HOOKS, Clash

if TYPE_CHECKING:
    from srt_services.plugins.calls import HookCalls
    from srt_services.plugins.discovery import PluginRecord
    from srt_services.plugins.registry import Registries

log = logging.getLogger("srt.plugins")

#: The record of a loaded plugin by its label, when it came from an entry point.
RecordOf = Callable[[str], "PluginRecord | None"]


def bad_hooks(obj: object, known: object) -> tuple[list[str], list[str]]:
    """Unknown hook names, and known hooks written without the marker.

    Both are refused rather than ignored: pluggy would silently skip them and the author
    would never learn why the hook does not run. ``known`` is pluggy's ``pm.hook``.
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
        if not hasattr(known, attr):
            unknown.append(attr)
        elif not isinstance(getattr(value, marker, None), dict):
            unmarked.append(attr)
    return unknown, unmarked


def bad_hooks_message(unknown: list[str], unmarked: list[str]) -> str:
    """Why a plugin with these hooks is refused (a "did you mean" for each unknown one)."""
    known = [h for h in dir(hookspecs) if h.startswith("srt_")]
    hints = []
    for hook in unknown:
        close = _closest_hook(hook, known)
        hints.append(f"{hook} (did you mean {close}?)" if close else hook)
    parts = []
    if hints:
        parts.append(f"implements hooks this core does not know: {', '.join(hints)}")
    if unmarked:
        parts.append(
            f"defines {', '.join(unmarked)} without @hookimpl (so srt would never call it)"
        )
    return "; ".join(parts)


class Registration:
    """Plugin objects into pluggy and the registries, and back out."""

    __slots__ = ("calls", "collected", "labels", "pm", "record_of", "registries")

    def __init__(self, calls: HookCalls, registries: Registries, record_of: RecordOf) -> None:
        self.pm = calls.pm
        self.calls = calls
        #: pluggy's plugin names to srt's labels; the same dict the calls read
        self.labels = calls.labels
        self.registries = registries
        self.record_of = record_of
        self.collected: set[str] = set()

    def register(self, obj: object, name: str, label: str) -> None:
        """Register one plugin object and collect what its registration hooks return."""
        unknown, unmarked = bad_hooks(obj, self.pm.hook)
        if unknown or unmarked:
            raise PluginError(f"{label} {bad_hooks_message(unknown, unmarked)}")
        try:
            self.pm.register(obj, name=name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise PluginError(f"{label}: {exc}") from None
        self.labels[name] = label
        try:
            self._collect(name)
        except PluginError:
            self.pm.unregister(obj)
            self.labels.pop(name, None)
            raise

    def unregister(self, name: str) -> None:
        """Drop a plugin and everything it registered."""
        self.pm.unregister(name=name)
        label = self.labels.pop(name, name)
        self.collected.discard(name)
        self.registries.remove_owner(label)

    def hooks_of(self, obj: object) -> list[str]:
        """The srt hooks ``obj`` implements, sorted."""
        return sorted(
            h.name for h in self.pm.get_hookcallers(obj) or () if h.name.startswith("srt_")
        )

    def _collect(self, plugin_name: str) -> None:
        if plugin_name in self.collected:
            return
        label = self.labels.get(plugin_name, plugin_name)
        gathered = self._gather(plugin_name, label)
        if label != BUILTIN:
            self.registries.refuse_builtin_names(label, gathered)
        for clash in self.registries.add(label, gathered):
            self._note_clash(label, clash)
        self.collected.add(plugin_name)

    def _gather(self, plugin_name: str, label: str) -> list[tuple[str, type[Any]]]:
        """(capability, class) for what this plugin's registration hooks return."""
        plugin = self.pm.get_plugin(plugin_name)
        gathered: list[tuple[str, type[Any]]] = []
        for capability, hook_name in REGISTRATION_HOOKS.items():
            # pluggy calls this plugin's implementation (and its own wrappers) alone, so
            # what comes back is known to be this plugin's, and a clash can name it.
            caller = self.calls.only(plugin, hook_name)
            if not caller.get_hookimpls():
                continue
            try:
                with plugin_code():
                    results = self.calls.run(hook_name, caller, {})
            except PluginEscaped as exc:
                raise PluginError(f"{label}: {hook_name} raised {exc}") from exc.original
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

    def _note_clash(self, label: str, clash: Clash) -> None:
        capability, name, other = clash
        log.warning("%s %r is registered by both %s and %s", capability, name, other, label)
        for record, peer in ((self.record_of(label), other), (self.record_of(other), label)):
            if record is not None:
                problem = f"{capability} {name!r} is also registered by {peer}"
                record.problems.append(problem)
                record.clashes.append(problem)


def _closest_hook(hook: str, known: list[str]) -> str | None:
    """The hook a misspelt name most likely means: among the close spellings, one that ends
    in the same word (``srt_register_kinds`` is ``srt_register_service_kinds``: the last
    word names what is registered), else the closest."""
    close = get_close_matches(hook, known, n=3)
    last = hook.rsplit("_", 1)[-1]
    same_word = [c for c in close if c.rsplit("_", 1)[-1] == last]
    found = same_word or close
    return found[0] if found else None
