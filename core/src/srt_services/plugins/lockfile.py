"""``srt plugins lock`` files: the exact plugin set a site runs.

A lock names each plugin distribution with its version and a hash of its installed
``RECORD`` (the list of files with their own hashes), so that reinstalling the same version
from a different build, or editing an installed file, is noticed too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any, ClassVar

from srt_services.errors import SrtError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from srt_services.plugins.discovery import PluginRecord

LOCK_VERSION = 1


class LockError(SrtError):
    pass


@dataclass(frozen=True, slots=True)
class LockedPlugin:
    name: str
    version: str
    record_sha256: str | None


@dataclass(slots=True)
class Lock:
    plugins: list[LockedPlugin] = field(default_factory=list)
    core_version: str | None = None

    def versions(self) -> dict[str, str]:
        return {p.name: p.version for p in self.plugins}

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "srt_plugin_lock": LOCK_VERSION,
            "core": self.core_version,
            "plugins": [
                {"name": p.name, "version": p.version, "record_sha256": p.record_sha256}
                for p in sorted(self.plugins, key=lambda p: p.name.lower())
            ],
        }
        return json.dumps(doc, indent=2) + "\n"


def record_hash(dist_name: str) -> str | None:
    """SHA-256 of the distribution's RECORD file, ``None`` when it has none."""
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        return None
    text = dist.read_text("RECORD")
    if text is None:
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def lock_of(records: Iterable[PluginRecord], core_version: str) -> Lock:
    """The lock describing ``records`` (every installed plugin, whatever its status: a
    blocked plugin is still installed, and the lock is about what is installed)."""
    seen: dict[str, LockedPlugin] = {}
    for record in records:
        record.read_metadata()
        if record.key in seen:
            continue
        seen[record.key] = LockedPlugin(
            name=record.dist, version=record.version, record_sha256=record.record_sha256()
        )
    return Lock(plugins=list(seen.values()), core_version=core_version)


def write_lock(path: str, lock: Lock) -> None:
    """Write atomically, so a site config never points at a half-written lock."""
    import os
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".srt-lock-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(lock.to_json())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True, slots=True)
class Difference:
    """One way the environment differs from a lock or the site config.

    ``change`` is one of ``added``, ``removed``, ``version``, ``record``, ``core``, ``site``.
    """

    change: str
    name: str
    locked: str | None = None
    installed: str | None = None
    detail: str = ""

    SIGNS: ClassVar[dict[str, str]] = {
        "added": "+",
        "removed": "-",
        "version": "~",
        "record": "~",
        "core": "~",
        "site": "!",
    }

    def render(self) -> str:
        sign = self.SIGNS.get(self.change, "?")
        if self.change == "added":
            what = f"{self.name} {self.installed}: installed, not in the lock"
        elif self.change == "removed":
            what = f"{self.name} {self.locked}: in the lock, not installed"
        elif self.change in {"version", "core"}:
            what = f"{self.name} {self.locked} -> {self.installed}: version changed"
        elif self.change == "record":
            what = (
                f"{self.name} {self.installed}: installed files changed (RECORD hash differs;"
                " reinstalled from another build or edited)"
            )
        else:
            what = f"{self.name}: {self.detail}"
        return f"{sign} {what}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "change": self.change,
            "name": self.name,
            "locked": self.locked,
            "installed": self.installed,
            "detail": self.detail or self.render()[2:],
        }


def compare(lock: Lock, current: Lock) -> list[Difference]:
    """How ``current`` (the environment) differs from ``lock``, sorted by name."""
    from srt_services.plugins.discovery import normalize, same_version

    old = {normalize(p.name): p for p in lock.plugins}
    new = {normalize(p.name): p for p in current.plugins}
    out: list[Difference] = []
    if (
        lock.core_version
        and current.core_version
        and not same_version(lock.core_version, current.core_version)
    ):
        out.append(Difference("core", "srt-services", lock.core_version, current.core_version))
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if was is None and now is not None:
            out.append(Difference("added", now.name, None, now.version))
        elif now is None and was is not None:
            out.append(Difference("removed", was.name, was.version, None))
        elif was is not None and now is not None:
            if not same_version(was.version, now.version):
                out.append(Difference("version", now.name, was.version, now.version))
            elif was.record_sha256 and was.record_sha256 != now.record_sha256:
                out.append(Difference("record", now.name, was.version, now.version))
    return out


def read_lock(path: str) -> Lock:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise LockError(f"plugin lock file {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise LockError(f"cannot read plugin lock file {path}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("srt_plugin_lock") != LOCK_VERSION:
        raise LockError(f"{path} is not an srt plugin lock (version {LOCK_VERSION})")
    plugins = []
    for item in doc.get("plugins", []):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise LockError(f"{path}: every plugin needs a name")
        plugins.append(
            LockedPlugin(
                name=item["name"],
                version=str(item.get("version", "")),
                record_sha256=item.get("record_sha256"),
            )
        )
    return Lock(plugins=plugins, core_version=doc.get("core"))
