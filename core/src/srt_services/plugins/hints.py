"""What to tell a user who names a kind, probe, placement... that no plugin provides.

The message names the plugin that would provide it when one declares it (and why that
plugin is not loaded), else the known names with a "did you mean", the first-party
plugin to ``pip install`` for a first-party kind, the plugins that declare nothing and did
not load, and what the site config requires but is not installed.
"""

from __future__ import annotations

from difflib import get_close_matches
from typing import TYPE_CHECKING, Any

from srt_services.errors import PluginError
from srt_services.plugins.versions import normalize

if TYPE_CHECKING:
    from collections.abc import Sequence

    from srt_services.plugins.discovery import PluginRecord
    from srt_services.plugins.registry import Registry

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


def pip_command(dist: str) -> str:
    """How to install a first-party plugin (through core's extra where there is one)."""
    if dist in CORE_EXTRAS:
        return f"pip install 'srt-services[{dist.removeprefix('srt-')}]'"
    return f"pip install {dist}"


def unknown_name(
    registry: Registry[Any],
    name: str,
    noun: str,
    records: Sequence[PluginRecord],
    missing_required: list[str],
) -> UnknownName:
    """The error for ``name``, which ``registry`` does not have after loading what may
    provide it; ``missing_required`` are the site-required plugins not installed."""
    declared = _declared_by(registry.capability, name, noun, records)
    if declared is not None:
        return declared
    known = _known_names(registry, records)
    hints = [
        *_did_you_mean(registry.capability, name, known, records),
        *_silent_plugins(records),
    ]
    if missing_required:
        hints.append(
            f"the site config requires {', '.join(missing_required)}, which is not installed"
        )
    tail = "; " + "; ".join(hints) if hints else ""
    return UnknownName(f"{noun} {name!r} is not known (known: {', '.join(known)}){tail}")


def _declared_by(
    capability: str, name: str, noun: str, records: Sequence[PluginRecord]
) -> UnknownName | None:
    """The error when an installed plugin declares ``name`` (so it is that plugin's fault)."""
    for record in records:
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
    return None


def _known_names(registry: Registry[Any], records: Sequence[PluginRecord]) -> list[str]:
    """Registered names, and the names installed plugins declare but that nobody asked for
    yet (so not imported), which are as known; clashing names are left out."""
    conflicts = registry.conflicts
    declared = (
        n
        for r in records
        if r.status in {"discovered", "loaded"}
        for n in r.provides.get(registry.capability, ())
        if not conflicts.get(n)
    )
    return sorted({*registry.items, *declared})


def _did_you_mean(
    capability: str, name: str, known: list[str], records: Sequence[PluginRecord]
) -> list[str]:
    """A "did you mean" for a typo of a known name or of a first-party kind that is not
    installed, and for such a kind, what to install."""
    installed = {r.key for r in records}
    missing = (
        [k for k, d in FIRST_PARTY_KINDS.items() if normalize(d) not in installed]
        if capability == "kind"
        else []
    )
    close = get_close_matches(name, [*known, *(m for m in missing if m not in known)], n=1)
    wanted = close[0] if close else name
    where = ""
    if wanted in missing:
        dist = FIRST_PARTY_KINDS[wanted]
        where = f"provided by {dist}, which is not installed: {pip_command(dist)}"
    if wanted != name:
        return [f"did you mean {wanted!r}?" + (f" ({where})" if where else "")]
    return [f"it is {where}"] if where else []


def _silent_plugins(records: Sequence[PluginRecord]) -> list[str]:
    """Plugins that did not load and declare nothing: one of them may provide the name."""
    silent = [
        f"{r.dist} {r.version} ({r.status}: {r.reason})"
        for r in records
        if not r.declares_anything and r.status not in {"loaded", "discovered"}
    ]
    if not silent:
        return []
    return [
        "these plugins were not loaded and do not declare what they provide, so one of"
        f" them may be the source: {', '.join(silent)}"
    ]
