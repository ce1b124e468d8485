"""Finding installed plugins and deciding, before importing anything, which may load.

Order, applied to every distribution with an ``srt.plugins`` entry point (the same order
``docs/site-admins.md`` documents):

1. The core's built-in plugin is always registered first and cannot be blocked.
2. One scan of the installed distributions' entry points (metadata only, cached).
3. ``SRT_DISABLED_PLUGINS`` (comma list) blocks; the site config's ``block`` blocks.
4. ``SRT_PLUGINS`` (comma list; empty means none) is an allow-list; the site config's
   ``allow`` is another; a plugin must pass both when both are set.
5. ``SRT_DISABLE_PLUGIN_AUTOLOAD=1`` loads nothing that ``SRT_PLUGINS`` does not name.
6. The plugin's own ``Requires-Dist: srt-services ...`` must accept this core's version;
   the site config's ``require`` pins and lock file must accept the plugin's version.
7. Only then is the module imported, inside a guard that records any error.

Names are distribution names as ``pip list`` shows them, compared normalised (PEP 503), and
entry-point names are accepted as aliases.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from typing import Any

CORE_DIST = "srt-services"
PLUGIN_GROUP = "srt.plugins"
PROVIDES_GROUP = "srt.provides"

#: Capability prefixes a plugin may declare under ``srt.provides`` (``kind.etcd``...).
CAPABILITIES = ("kind", "probe", "placement", "expansion", "launcher", "command", "hook")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _split_env(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {normalize(v) for v in value.split(",") if v.strip()}


@dataclass(slots=True)
class PluginRecord:
    """Everything known about one installed plugin, loaded or not."""

    dist: str
    version: str
    entry_name: str
    module: str
    location: str
    provides: dict[str, list[str]] = field(default_factory=dict)
    core_requirement: str | None = None
    #: discovered | loaded | blocked | not allowed | incompatible | failed
    status: str = "discovered"
    reason: str = ""
    error: str | None = None
    hooks: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return normalize(self.dist)

    @property
    def loadable(self) -> bool:
        return self.status in {"discovered", "loaded"}

    def declares(self, capability: str, name: str) -> bool:
        return name in self.provides.get(capability, ())

    @property
    def declares_anything(self) -> bool:
        return bool(self.provides)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.dist,
            "version": self.version,
            "entry_point": f"{self.entry_name} = {self.module}",
            "location": self.location,
            "status": self.status,
            "reason": self.reason,
            "error": self.error,
            "provides": {k: sorted(v) for k, v in sorted(self.provides.items())},
            "hooks": sorted(self.hooks),
            "core_requirement": self.core_requirement,
        }


def _dist_location(dist: metadata.Distribution) -> str:
    path = getattr(dist, "_path", None)
    if path is None:
        return "?"
    return str(getattr(path, "parent", path))


@lru_cache(maxsize=1)
def scan() -> tuple[PluginRecord, ...]:
    """One metadata scan of ``srt.plugins`` and ``srt.provides`` (cached per process)."""
    eps = metadata.entry_points()
    records: dict[tuple[str, str], PluginRecord] = {}
    provides: dict[str, dict[str, list[str]]] = {}
    for ep in eps.select(group=PROVIDES_GROUP):
        dist = ep.dist
        if dist is None:
            continue
        cap, _, name = ep.name.partition(".")
        if cap in CAPABILITIES and name:
            provides.setdefault(normalize(dist.metadata["Name"]), {}).setdefault(cap, []).append(
                name
            )
    for ep in eps.select(group=PLUGIN_GROUP):
        dist = ep.dist
        dist_name = dist.metadata["Name"] if dist is not None else ep.name
        version = dist.version if dist is not None else "?"
        core_req = None
        if dist is not None:
            for req in dist.requires or ():
                if normalize(re.split(r"[\s;<>=!~\[(]", req, maxsplit=1)[0]) == CORE_DIST:
                    if "extra ==" not in req:
                        core_req = req
                        break
        record = PluginRecord(
            dist=dist_name,
            version=version,
            entry_name=ep.name,
            module=ep.value,
            location=_dist_location(dist) if dist is not None else "?",
            provides=provides.get(normalize(dist_name), {}),
            core_requirement=core_req,
        )
        records.setdefault((record.key, ep.value), record)
    return tuple(records.values())


@dataclass(frozen=True, slots=True)
class Controls:
    """The plugin controls of this process, read once from the environment and site config."""

    autoload: bool = True
    allow_env: frozenset[str] | None = None
    disabled_env: frozenset[str] = frozenset()
    allow_site: frozenset[str] | None = None
    block_site: frozenset[str] = frozenset()
    require: tuple[str, ...] = ()
    lock: dict[str, str] | None = None
    lock_path: str | None = None
    strict: bool = False

    @classmethod
    def from_environment(cls, env: dict[str, str] | None = None, site: Any = None) -> Controls:
        env = dict(os.environ if env is None else env)
        allow = _split_env(env.get("SRT_PLUGINS"))
        disabled = _split_env(env.get("SRT_DISABLED_PLUGINS")) or set()
        autoload = env.get("SRT_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() not in {
            "1",
            "true",
            "yes",
        }
        policy = getattr(site, "plugins", None)
        lock = None
        lock_path = None
        if policy is not None and policy.lock:
            from srt_services.plugins.lockfile import read_lock

            lock_path = policy.lock
            lock = {normalize(k): v for k, v in read_lock(policy.lock).versions().items()}
        return cls(
            autoload=autoload,
            allow_env=frozenset(allow) if allow is not None else None,
            disabled_env=frozenset(disabled),
            allow_site=frozenset(normalize(n) for n in policy.allow)
            if policy is not None and policy.allow is not None
            else None,
            block_site=frozenset(normalize(n) for n in policy.block) if policy else frozenset(),
            require=tuple(policy.require) if policy else (),
            lock=lock,
            lock_path=lock_path,
            strict=bool(policy.strict) if policy else False,
        )

    def decide(self, record: PluginRecord, core_version: str) -> None:
        """Set ``record.status``/``reason`` for everything that can be known before import."""
        names = {record.key, normalize(record.entry_name)}
        if names & self.disabled_env:
            record.status, record.reason = "blocked", "named in SRT_DISABLED_PLUGINS"
            return
        if names & self.block_site:
            record.status, record.reason = "blocked", "blocked by the site config"
            return
        if not self.autoload and (self.allow_env is None or not names & self.allow_env):
            record.status = "not allowed"
            record.reason = "SRT_DISABLE_PLUGIN_AUTOLOAD=1 and not named in SRT_PLUGINS"
            return
        if self.allow_env is not None and not names & self.allow_env:
            record.status, record.reason = "not allowed", "not in SRT_PLUGINS"
            return
        if self.allow_site is not None and not names & self.allow_site:
            record.status, record.reason = "not allowed", "not in the site config's allow list"
            return
        problem = core_mismatch(record, core_version)
        if problem:
            record.status, record.reason = "incompatible", problem
            return
        pin = self.pin_mismatch(record)
        if pin:
            record.status, record.reason = "incompatible", pin
            return

    def pin_mismatch(self, record: PluginRecord) -> str | None:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.version import InvalidVersion, Version

        for text in self.require:
            try:
                req = Requirement(text)
            except InvalidRequirement:
                continue
            if normalize(req.name) != record.key:
                continue
            try:
                ok = req.specifier.contains(Version(record.version), prereleases=True)
            except InvalidVersion:
                ok = False
            if not ok:
                return f"version {record.version} does not satisfy the site's require {text!r}"
        if self.lock is not None:
            locked = self.lock.get(record.key)
            if locked is None:
                return f"not in the site's lock file {self.lock_path}"
            if locked != record.version:
                return f"version {record.version} differs from {locked} in the lock file"
        return None


def core_mismatch(record: PluginRecord, core_version: str) -> str | None:
    """Why this core cannot host ``record`` according to the plugin's own metadata."""
    if record.core_requirement is None:
        return None
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import Version

    try:
        req = Requirement(record.core_requirement)
    except InvalidRequirement:
        return f"unreadable core requirement {record.core_requirement!r}"
    if req.specifier and not req.specifier.contains(Version(core_version), prereleases=True):
        return f"needs srt-services{req.specifier} but this is srt-services {core_version}"
    return None
