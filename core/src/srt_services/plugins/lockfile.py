"""``srt plugins lock`` files: the exact plugin set a site runs.

A lock names each plugin distribution with its version and one hash over the content of
its installed files (:func:`srt_services.plugins.discovery.files_hash_of`), so that an
edited installed file, or another build of the same version, is noticed; installing the
same wheel another way (pip, uv, from a URL) is not a change.

Format 1 held a hash of each RECORD instead, which changes with the way a wheel is
installed and not with an edit. Such a lock is still read (names and versions are still
enforced) but its hashes are not checked, and ``srt plugins check`` asks for a rewrite.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from srt_services.errors import SrtError
from srt_services.plugins.versions import normalize, same_version

if TYPE_CHECKING:
    from collections.abc import Iterable


class Installed(Protocol):
    """What a lock records of an installed plugin (a discovery record is one)."""

    dist: str
    version: str

    @property
    def key(self) -> str: ...

    def read_metadata(self) -> None: ...

    def files_sha256(self) -> str | None: ...


LOCK_VERSION = 2
#: Versions :func:`read_lock` accepts.
READABLE_VERSIONS = (1, 2)


class LockError(SrtError):
    pass


@dataclass(frozen=True, slots=True)
class LockedPlugin:
    name: str
    version: str
    #: The files hash (``None``: not checked, as for every plugin of a format-1 lock).
    files_sha256: str | None


@dataclass(slots=True)
class Lock:
    plugins: list[LockedPlugin] = field(default_factory=list)
    core_version: str | None = None
    #: The format the lock was read in (what :meth:`to_json` writes is always the current).
    format: int = LOCK_VERSION

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "srt_plugin_lock": LOCK_VERSION,
            "core": self.core_version,
            "plugins": [
                {"name": p.name, "version": p.version, "files_sha256": p.files_sha256}
                for p in sorted(self.plugins, key=lambda p: p.name.lower())
            ],
        }
        return json.dumps(doc, indent=2) + "\n"


def lock_of(records: Iterable[Installed], core_version: str) -> Lock:
    """The lock describing ``records`` (every installed plugin, whatever its status: a
    blocked plugin is still installed, and the lock is about what is installed)."""
    seen: dict[str, LockedPlugin] = {}
    for record in records:
        record.read_metadata()
        if record.key in seen:
            continue
        seen[record.key] = LockedPlugin(
            name=record.dist, version=record.version, files_sha256=record.files_sha256()
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
    """One way the environment differs from a lock, the site config, or a working set.

    ``change`` is one of ``added``, ``removed``, ``version``, ``files``, ``core`` (against a
    lock), ``site`` (a site rule or the lock file itself), ``failed``, ``incompatible`` and
    ``clash`` (plugins that cannot load, found with or without a lock).
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
        "files": "~",
        "core": "~",
        "site": "!",
        "failed": "!",
        "incompatible": "!",
        "clash": "!",
    }

    def render(self) -> str:
        sign = self.SIGNS.get(self.change, "?")
        if self.change == "added":
            what = f"{self.name} {self.installed}: installed, not in the lock"
        elif self.change == "removed":
            what = f"{self.name} {self.locked}: in the lock, not installed"
        elif self.change in {"version", "core"}:
            what = f"{self.name} {self.locked} -> {self.installed}: version changed"
        elif self.change == "files":
            what = (
                f"{self.name} {self.installed}: installed files changed (edited, or another"
                " build of this version installed)"
            )
        elif self.change in {"failed", "incompatible"}:
            what = f"{self.name} {self.installed}: {self.change}: {self.detail}"
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
            elif was.files_sha256 and was.files_sha256 != now.files_sha256:
                out.append(Difference("files", now.name, was.version, now.version))
    return out


#: The largest lock file read (one line per plugin: a few KB).
MAX_LOCK_SIZE = 4 << 20


def read_lock(path: str) -> Lock:
    """The lock at ``path``; :class:`LockError` naming the file and the field when it
    cannot be read or is not a lock (a FIFO there is refused, never waited on)."""
    from srt_services.safefile import UnsafeFile, read_file

    try:
        raw = read_file(path, MAX_LOCK_SIZE)
    except FileNotFoundError:
        raise LockError(
            f"plugin lock file {path} does not exist; write it with `srt plugins lock -o {path}`"
        ) from None
    except UnsafeFile as exc:
        raise LockError(f"plugin lock file {exc}") from None
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise LockError(f"cannot read plugin lock file {path}: {_short(exc)}") from None
    version = doc.get("srt_plugin_lock") if isinstance(doc, dict) else None
    if type(version) is not int or version not in READABLE_VERSIONS:
        raise LockError(
            f"{path} is not an srt plugin lock (format {LOCK_VERSION}); write one with"
            f" `srt plugins lock -o {path}`"
        )
    items = doc.get("plugins", [])
    if not isinstance(items, list):
        raise LockError(f"{path}: plugins must be a list, not {_type(items)}")
    core = doc.get("core")
    if core is not None and not isinstance(core, str):
        raise LockError(f"{path}: core must be a version string, not {_type(core)}")
    plugins = [
        _locked_plugin(f"{path}: plugins[{i}]", item, version) for i, item in enumerate(items)
    ]
    return Lock(plugins=plugins, core_version=core, format=version)


def _locked_plugin(where: str, item: Any, version: int) -> LockedPlugin:
    """One entry of a lock's ``plugins``; :class:`LockError` naming the field if wrong."""
    if not isinstance(item, dict):
        raise LockError(f"{where} must be an object, not {_type(item)}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise LockError(f"{where}.name: every plugin needs a name (a string)")
    plugin_version = item.get("version", "")
    if not isinstance(plugin_version, str):
        raise LockError(f"{where}.version must be a string, not {_type(plugin_version)}")
    files = item.get("files_sha256") if version >= 2 else None
    if files is not None and not isinstance(files, str):
        raise LockError(f"{where}.files_sha256 must be a string, not {_type(files)}")
    return LockedPlugin(name=name, version=plugin_version, files_sha256=files)


def _type(value: Any) -> str:
    """A JSON value's kind, for messages (never its repr: it may be nested or huge)."""
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string"}.get(
        type(value), "an object" if isinstance(value, dict) else "a list"
    )


def _short(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc)[:200]
