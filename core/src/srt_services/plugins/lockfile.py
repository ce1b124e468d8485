"""``srt plugins lock`` files: the exact plugin set a site runs.

A lock names each plugin distribution with its version and a hash of its installed
``RECORD`` (the list of files with their own hashes), so that reinstalling the same version
from a different build, or editing an installed file, is noticed too.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from srt_services.errors import SrtError

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
    """SHA-256 of the distribution's RECORD file, ``None`` when it has none (editable dev)."""
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        return None
    text = dist.read_text("RECORD")
    if text is None:
        return None
    return hashlib.sha256(text.encode()).hexdigest()


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
