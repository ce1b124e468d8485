"""Why a service kind is not available, in words a recipe error can carry.

An explicit ``type: x`` that no plugin provides is reported by the facade's lookup itself;
a kind that a *setting* implies (``engine.failover`` needs ``gms``) is never looked up by
name, so the rule that checks implied kinds asks here instead. Both name the plugin and
what to do about it: install it, or have the site allow it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services.plugins.hints import pip_command
from srt_services.plugins.versions import normalize

if TYPE_CHECKING:
    from srt_services.plugins.discovery import PluginRecord
    from srt_services.plugins.manager import PluginSet


__all__ = ["Unavailable", "kind_unavailable", "pip_command"]


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A kind no loaded plugin provides: who would, what state it is in, how to fix it.

    Reads as ``<plugin> <state>: <fix>`` (``srt-gms is not installed: pip install srt-gms``).
    """

    plugin: str
    state: str
    fix: str
    #: The plugin is installed (blocked, not allowed, broken...), not merely absent.
    installed: bool


def kind_unavailable(plugins: PluginSet, kind: str, dist: str) -> Unavailable | None:
    """``None`` when a loadable plugin provides ``kind`` (loading it if needed), else why not.

    ``dist`` is the distribution known to provide the kind (core's table of first-party
    kinds), used when no installed plugin declares it.
    """
    if plugins.has("kind", kind):
        return None
    for record in plugins.records:
        if record.declares("kind", kind):
            return _state(record, kind)
    for record in plugins.records:
        if record.key == normalize(dist):
            if record.status == "loaded":
                return Unavailable(
                    f"{record.dist} {record.version}",
                    f"is installed but registers no {kind} kind",
                    f"upgrade it (pip install -U {dist})",
                    installed=True,
                )
            return _state(record, kind)
    return Unavailable(dist, "is not installed", pip_command(dist), installed=False)


def _state(record: PluginRecord, kind: str) -> Unavailable:
    label = f"{record.dist} {record.version}"
    detail = record.reason + (f": {record.error}" if record.error else "")
    if record.status in {"blocked", "not allowed"}:
        fix = "allow it (SRT_PLUGINS, SRT_DISABLED_PLUGINS, the site config's plugins section)"
    elif record.status == "loaded":
        return Unavailable(
            label,
            f"declares the {kind} kind but did not register it",
            "report it to its authors (srt plugins list -v shows what it registered)",
            installed=True,
        )
    else:  # incompatible, failed
        fix = "see `srt plugins list -v`"
    return Unavailable(label, f"is {record.status} ({detail})", fix, installed=True)
