"""Finding installed plugins and deciding, before importing anything, which may load.

Order, applied to every distribution with an ``srt.plugins`` entry point (the same order
``docs/site-admins.md`` documents):

1. The core's built-in plugin is always registered first and cannot be blocked.
2. One scan of the installed distributions' entry points (metadata only, cached).
3. ``SRT_DISABLED_PLUGINS`` (comma list) blocks; the site config's ``block`` blocks.
4. ``SRT_DISABLE_PLUGIN_AUTOLOAD=1`` loads nothing that ``SRT_PLUGINS`` does not name.
5. ``SRT_PLUGINS`` (comma list; empty means none) is an allow-list; the site config's
   ``allow`` is another; a plugin must pass both when both are set.
6. The site config's ``require`` pins and lock file must accept the plugin's version.
7. Only when one of its capabilities is needed: the plugin's own
   ``Requires-Dist: srt-services ...`` must accept this core's version, and a locked
   plugin's installed files must hash to the locked value (:func:`files_hash_of`).
8. Only then is the module imported, inside a guard that records any error.

Steps 3 to 6 need nothing but the entry-point scan (name and version come from the
``.dist-info`` directory name), so deciding costs no file reads beyond the scan itself;
step 7 reads one plugin's METADATA (and, under a lock, its files) right before that plugin
is imported. That keeps resolving one kind with many plugins installed close to the cost of the
bare ``importlib.metadata`` scan.

Names are distribution names as ``pip list`` shows them, compared normalised (PEP 503), and
entry-point names are accepted as aliases.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import metadata
from typing import Any

from srt_services.plugins.versions import normalize, same_version

CORE_DIST = "srt-services"
PLUGIN_GROUP = "srt.plugins"
PROVIDES_GROUP = "srt.provides"

#: Capability prefixes a plugin may declare under ``srt.provides`` (``kind.etcd``...).
CAPABILITIES = (
    "kind",
    "probe",
    "placement",
    "expansion",
    "launcher",
    "engine",
    "benchmark",
    "format",
    "command",
    "hook",
)

#: Every status a record can have; ``discovered`` only until the plugin is needed.
STATUSES = ("discovered", "loaded", "blocked", "not allowed", "incompatible", "failed")

_TRUE = {"1", "true", "yes", "on"}


def _split_env(value: str | None) -> set[str] | None:
    if value is None:
        return None
    return {normalize(v.strip()) for v in value.split(",") if v.strip()}


def _requirement_name(text: str) -> str:
    return normalize(re.split(r"[\s;<>=!~\[(@]", text.strip(), maxsplit=1)[0])


#: A requirement that is a name and version clauses only (``srt-services>=1.0,<2``, what
#: every first-party plugin declares): no extras, URL, parentheses or marker.
_PLAIN_REQUIREMENT = re.compile(
    r"\s*[A-Za-z0-9][A-Za-z0-9._-]*\s*"
    r"(?P<spec>(?:~=|===|==|!=|<=|>=|<|>)\s*[^\s,;\[\]()@]+"
    r"(?:\s*,\s*(?:~=|===|==|!=|<=|>=|<|>)\s*[^\s,;\[\]()@]+)*)\s*"
)


def _core_specifier(text: str) -> Any:
    """The version specifier of a core requirement (a ``SpecifierSet``), or ``None`` when
    it cannot be read.

    The plain form is handed to ``packaging.specifiers`` alone, which reads each clause as
    ``packaging.requirements`` would; only another form (extras, a marker, a URL) loads the
    full requirement grammar, whose import (~15 ms: markers, platform tags, a tokenizer of
    some twenty patterns) every ``srt run`` would otherwise pay for the plugins it loads.
    """
    plain = _PLAIN_REQUIREMENT.fullmatch(text)
    if plain is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            return SpecifierSet(plain["spec"])
        except InvalidSpecifier:
            pass  # the full grammar says whether it is unreadable
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text).specifier
    except InvalidRequirement:
        return None


def _stem_name_version(dist: metadata.Distribution) -> tuple[str, str] | None:
    """Name and version from ``<name>-<version>.dist-info``, without opening a file.

    Wheel installers always write that directory name with both parts normalised; anything
    else (egg-info with a python tag, a zip) returns ``None`` and the caller reads METADATA.
    """
    path = getattr(dist, "_path", None)
    if path is None:
        return None
    stem = os.path.basename(str(path))
    base, ext = os.path.splitext(stem)
    if ext != ".dist-info":
        return None
    name, sep, version = base.partition("-")
    if not sep or not name or not version or "-" in version:
        return None
    return normalize(name), version


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
    #: one of :data:`STATUSES`
    status: str = "discovered"
    reason: str = ""
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    #: What went wrong after a successful import: names another plugin registered too
    #: (``kind 'x' is also registered by ...``), a command hook that raised.
    problems: list[str] = field(default_factory=list)
    #: The problems that are clashes (also in :attr:`problems`; ``PluginSet.clashes`` has
    #: each clash once, with both owners).
    clashes: list[str] = field(default_factory=list)
    #: What the plugin's registration hooks returned, by capability (set once loaded).
    registered: dict[str, list[str]] = field(default_factory=dict)
    #: The formatted traceback of a failed import or registration (``srt plugins list -v``).
    traceback: str | None = field(default=None, repr=False)
    #: The distribution object, for the few reads done lazily (METADATA, RECORD).
    distribution: metadata.Distribution | None = field(default=None, repr=False, compare=False)
    metadata_read: bool = False

    @property
    def key(self) -> str:
        return normalize(self.dist)

    def declares(self, capability: str, name: str) -> bool:
        return name in self.provides.get(capability, ())

    @property
    def declares_anything(self) -> bool:
        return bool(self.provides)

    def read_metadata(self) -> None:
        """Replace the names guessed from the directory with METADATA's, and read the core
        requirement. Done once, right before import or when listing."""
        if self.metadata_read:
            return
        self.metadata_read = True
        dist = self.distribution
        if dist is None:
            return
        try:
            meta = dist.metadata
        except Exception:
            return
        name = meta["Name"] if meta is not None else None
        if name:
            self.dist = name
        version = meta["Version"] if meta is not None else None
        if version:
            self.version = version
        self.core_requirement = find_core_requirement(meta.get_all("Requires-Dist") or ())

    def fresh(self) -> PluginRecord:
        """A copy with the decisions of a plugin set cleared (the scan is shared and cached;
        each set decides on its own copies). Cheaper than ``dataclasses.replace``."""
        return PluginRecord(
            self.dist,
            self.version,
            self.entry_name,
            self.module,
            self.location,
            {k: list(v) for k, v in self.provides.items()},
            self.core_requirement,
            distribution=self.distribution,
            metadata_read=self.metadata_read,
        )

    def files_sha256(self) -> str | None:
        """The identity of the installed files (``None`` without a file list)."""
        return files_hash_of(self.distribution) if self.distribution is not None else None

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
            "registered": {k: sorted(v) for k, v in sorted(self.registered.items())},
            "hooks": sorted(self.hooks),
            "problems": list(self.problems),
            "core_requirement": self.core_requirement,
        }


def find_core_requirement(requires: Any) -> str | None:
    """The unconditional ``srt-services`` requirement among ``Requires-Dist`` lines.

    A requirement under an extra (``srt-services[testing]; extra == "test"``) says nothing
    about which core the plugin runs on, so it is skipped.
    """
    for text in requires or ():
        if _requirement_name(text) != CORE_DIST:
            continue
        if ";" not in text:  # no marker: kept as written, readable or not
            return str(text)
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            req = Requirement(text)
        except InvalidRequirement:
            return str(text)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        return str(text)
    return None


#: dist-info files that depend on how a wheel was installed, not on what it holds.
INSTALL_RECORDS = frozenset(
    {"RECORD", "RECORD.jws", "RECORD.p7s", "INSTALLER", "REQUESTED", "direct_url.json"}
)


def files_hash_of(dist: metadata.Distribution) -> str | None:
    """One SHA-256 over the content of every file the distribution installed.

    Hashes what is on disk (so an edited file changes it, which RECORD's own hashes would
    not show), and leaves out what depends on the installer rather than the wheel: the
    records in :data:`INSTALL_RECORDS`, byte code, and files outside the package directory
    (console scripts, whose launcher and interpreter line each installer writes its own
    way). The same wheel installed by pip, ``pip --no-deps``, uv or from a direct URL
    therefore hashes the same. A file in the list but missing on disk counts too.
    """
    files = dist.files
    if files is None:
        return None
    entries = []
    for item in files:
        parts = item.parts
        if not parts or parts[0] == ".." or "__pycache__" in parts:
            continue
        if item.suffix in (".pyc", ".pyo"):
            continue
        if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in INSTALL_RECORDS:
            continue
        try:
            with open(item.locate(), "rb") as fh:
                digest = hashlib.file_digest(fh, "sha256").hexdigest()
        except FileNotFoundError:
            digest = "missing"
        except OSError as exc:
            digest = f"unreadable: {exc.strerror}"
        entries.append(f"{'/'.join(parts)}\0{digest}\n")
    return hashlib.sha256("".join(sorted(entries)).encode()).hexdigest()


def _dist_location(dist: metadata.Distribution) -> str:
    path = getattr(dist, "_path", None)
    if path is None:
        return "?"
    return str(getattr(path, "parent", path))


def _entry_point_sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """The ``srt.*`` sections of an ``entry_points.txt`` (an INI file: ``[group]`` headers,
    ``name = value`` lines)."""
    out: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[" and line[-1] == "]":
            group = line[1:-1].strip()
            current = out.setdefault(group, []) if group in (PLUGIN_GROUP, PROVIDES_GROUP) else None
            continue
        if current is not None:
            name, sep, value = line.partition("=")
            if sep:
                current.append((name.strip(), value.strip()))
    return out


def _unique_distributions() -> list[metadata.Distribution]:
    """Installed distributions, the first of each name on ``sys.path`` only (what
    ``importlib.metadata.entry_points()`` considers, and what Python would import)."""
    seen: set[str] = set()
    out = []
    for dist in metadata.distributions():
        key = getattr(dist, "_normalized_name", None) or normalize(dist.metadata["Name"] or "")
        if key in seen:
            continue
        seen.add(key)
        out.append(dist)
    return out


@lru_cache(maxsize=1)
def scan() -> tuple[PluginRecord, ...]:
    """One metadata scan of ``srt.plugins`` and ``srt.provides`` (cached per process).

    Reads exactly the files ``importlib.metadata.entry_points()`` reads (each
    distribution's ``entry_points.txt``) but parses only the files that mention an ``srt.``
    group, instead of building entry-point objects for every console script of the venv;
    see the module docstring for why name and version come from the directory name here.
    """
    records: dict[tuple[str, str], PluginRecord] = {}
    for dist in _unique_distributions():
        text = dist.read_text("entry_points.txt")
        if not text or "srt." not in text:
            continue
        sections = _entry_point_sections(text)
        plugin_eps = sections.get(PLUGIN_GROUP)
        if not plugin_eps:
            continue
        declared: dict[str, list[str]] = {}
        for ep_name, _value in sections.get(PROVIDES_GROUP, ()):
            cap, _, name = ep_name.partition(".")
            if cap in CAPABILITIES and name and name not in declared.get(cap, ()):
                declared.setdefault(cap, []).append(name)
        found = _stem_name_version(dist)
        for ep_name, value in plugin_eps:
            record = PluginRecord(
                dist=found[0] if found else ep_name,
                version=found[1] if found else "?",
                entry_name=ep_name,
                module=value,
                location=_dist_location(dist),
                provides=declared,
                distribution=dist,
            )
            if found is None:
                record.read_metadata()
            records.setdefault((record.key, value), record)
    return tuple(records.values())


def clear_cache() -> None:
    """Forget the scan (tests that install dummy distributions; after ``pip install``)."""
    scan.cache_clear()


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
    #: normalised name -> files hash from the lock (``None`` entries are not checked)
    lock_hashes: dict[str, str | None] | None = None
    site_path: str | None = None
    #: Why autoload is off, for the ``not allowed`` reason (the variable or the site key).
    autoload_off_by: str = ""

    @classmethod
    def from_environment(cls, env: dict[str, str] | None = None, site: Any = None) -> Controls:
        env = dict(os.environ if env is None else env)
        allow = _split_env(env.get("SRT_PLUGINS"))
        disabled = _split_env(env.get("SRT_DISABLED_PLUGINS")) or set()
        policy = getattr(site, "plugins", None)
        autoload, off_by = _autoload(env, policy, getattr(site, "path", None))
        lock, lock_hashes, lock_path = _lock(policy)
        strict = bool(policy.strict) if policy else False
        return cls(
            autoload=autoload,
            allow_env=frozenset(allow) if allow is not None else None,
            disabled_env=frozenset(disabled),
            allow_site=_normalized(policy.allow) if policy is not None else None,
            block_site=frozenset(normalize(n) for n in policy.block) if policy else frozenset(),
            require=tuple(policy.require) if policy else (),
            lock=lock,
            lock_path=lock_path,
            strict=strict or _env_true(env, "SRT_STRICT_PLUGINS"),
            lock_hashes=lock_hashes,
            site_path=getattr(site, "path", None),
            autoload_off_by=off_by,
        )

    @property
    def _site(self) -> str:
        return f"the site config {self.site_path}" if self.site_path else "the site config"

    def decide(self, record: PluginRecord, core_version: str | None = None) -> None:
        """Set ``record.status``/``reason`` for everything the scan alone tells.

        Passing ``core_version`` also runs :meth:`admit` (reads METADATA); the facade leaves
        that for the moment the plugin is needed.
        """
        names = {record.key, normalize(record.entry_name)}
        if names & self.disabled_env:
            record.status, record.reason = "blocked", "named in SRT_DISABLED_PLUGINS"
            return
        if names & self.block_site:
            record.status, record.reason = "blocked", f"listed in plugins.block of {self._site}"
            return
        if not self.autoload and (self.allow_env is None or not names & self.allow_env):
            record.status = "not allowed"
            record.reason = (
                f"autoload is off ({self.autoload_off_by or 'SRT_DISABLE_PLUGIN_AUTOLOAD=1'})"
                " and it is not named in SRT_PLUGINS"
            )
            return
        if self.allow_env is not None and not names & self.allow_env:
            record.status, record.reason = "not allowed", "not named in SRT_PLUGINS"
            return
        if self.allow_site is not None and not names & self.allow_site:
            record.status = "not allowed"
            record.reason = f"not listed in plugins.allow of {self._site}"
            return
        pin = self.pin_mismatch(record)
        if pin:
            record.status, record.reason = "incompatible", pin
            return
        if core_version is not None:
            self.admit(record, core_version)

    def admit(self, record: PluginRecord, core_version: str) -> bool:
        """The checks that read files, run right before import: the plugin's own core range
        and the lock's RECORD hash. Marks the record incompatible and returns ``False`` when
        the plugin must not be imported."""
        if record.status != "discovered":
            return record.status == "loaded"
        before = (record.dist, record.version)
        record.read_metadata()
        if (record.dist, record.version) != before:
            pin = self.pin_mismatch(record)
            if pin:
                record.status, record.reason = "incompatible", pin
                return False
        problem = core_mismatch(record, core_version)
        if problem:
            record.status, record.reason = "incompatible", problem
            return False
        if self.lock_hashes is not None:
            locked = self.lock_hashes.get(record.key)
            if locked is not None and record.files_sha256() != locked:
                record.status = "incompatible"
                record.reason = (
                    f"its installed files differ from the lock file {self.lock_path} (edited, or"
                    f" another build of {record.version} installed since the lock was written);"
                    f" reinstall the locked build, or accept it with `srt plugins lock -o"
                    f" {self.lock_path}`"
                )
                return False
        return True

    def pin_mismatch(self, record: PluginRecord) -> str | None:
        """Why the site's ``require`` or lock refuses this plugin's version, if it does."""
        for text in self.require:  # packaging loads only for a site that pins versions
            from packaging.requirements import InvalidRequirement, Requirement
            from packaging.version import InvalidVersion, Version

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
                return (
                    f"version {record.version} does not satisfy {text!r} in plugins.require of"
                    f" {self._site}; install a version it allows, or change the pin"
                )
        if self.lock is not None:
            accept = f"run `srt plugins lock -o {self.lock_path}` to accept the installed set"
            locked = self.lock.get(record.key)
            if locked is None:
                return (
                    f"not in the lock file {self.lock_path} (plugins.lock of {self._site});"
                    f" uninstall it, or {accept}"
                )
            if not same_version(locked, record.version):
                return (
                    f"version {record.version} differs from {locked} in the lock file"
                    f" {self.lock_path} (plugins.lock of {self._site}); install {locked},"
                    f" or {accept}"
                )
        return None


def _env_true(env: dict[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() in _TRUE


def _normalized(names: Any) -> frozenset[str] | None:
    return frozenset(normalize(n) for n in names) if names is not None else None


def _autoload(env: dict[str, str], policy: Any, site_path: str | None) -> tuple[bool, str]:
    """Whether plugins load without being named, and if not, what turned that off."""
    if _env_true(env, "SRT_DISABLE_PLUGIN_AUTOLOAD"):
        return False, "SRT_DISABLE_PLUGIN_AUTOLOAD=1"
    if policy is not None and not getattr(policy, "autoload", True):
        where = f" of the site config {site_path}" if site_path else ""
        return False, f"plugins.autoload = false{where}"
    return True, ""


def _lock(
    policy: Any,
) -> tuple[dict[str, str] | None, dict[str, str | None] | None, str | None]:
    """The site's lock file, read: versions and files hashes by normalised name, its path."""
    if policy is None or not policy.lock:
        return None, None, None
    from srt_services.plugins.lockfile import read_lock

    locked = read_lock(policy.lock)
    versions = {normalize(p.name): p.version for p in locked.plugins}
    hashes = {normalize(p.name): p.files_sha256 for p in locked.plugins}
    return versions, hashes, policy.lock


def core_mismatch(record: PluginRecord, core_version: str) -> str | None:
    """Why this core cannot host ``record`` according to the plugin's own metadata."""
    if record.core_requirement is None:
        return None
    from packaging.version import Version

    specifier = _core_specifier(record.core_requirement)
    if specifier is None:
        return f"unreadable core requirement {record.core_requirement!r}"
    if specifier and not specifier.contains(Version(core_version), prereleases=True):
        return (
            f"it requires srt-services{specifier} but this is srt-services {core_version};"
            " install a release of the plugin made for this core"
        )
    return None
