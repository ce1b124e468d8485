"""``srt plugins``: what is installed, what loaded, and the site's pinned set.

``list`` is the one place that forces discovery and imports every allowed plugin, so that
what it shows never depends on what a lazy command happened to need. ``lock`` and ``check``
never import a plugin: they read metadata only, so an admin can run them on a shared venv
that holds a broken or hostile plugin. ``new`` writes a plugin package from the template.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import rich_click as click

from srt_services.cli.main import SuggestingGroup

if TYPE_CHECKING:
    from collections.abc import Iterator

    from srt_services.plugins.discovery import PluginRecord
    from srt_services.plugins.lockfile import Difference, Lock
    from srt_services.plugins.manager import PluginSet


@click.group(cls=SuggestingGroup)
def plugins() -> None:
    """Inspect installed plugins and check them against the site's rules.

    Plugins are distributions with an `srt.plugins` entry point. Which may load is decided
    before import by SRT_DISABLE_PLUGIN_AUTOLOAD, SRT_PLUGINS, SRT_DISABLED_PLUGINS and the
    site config (SRT_SITE_CONFIG, default /etc/srt/site.toml).
    """


# --------------------------------------------------------------------------- list


@contextlib.contextmanager
def _plugin_warnings_shown_by_caller() -> Iterator[None]:
    """Silence the loader's warnings while a command reports the same problems itself, so
    that each is printed once (``srt -v`` and SRT_TRACE_PLUGINS=1 keep them)."""
    import logging

    from srt_services.cli import main

    logger = logging.getLogger("srt.plugins")
    if main.VERBOSE or os.environ.get("SRT_TRACE_PLUGINS") == "1":
        yield
        return
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


@plugins.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (a JSON list).")
@click.option("--all", "show_all", is_flag=True, help="Include the core's built-in plugin.")
@click.option("--hook", "hook", metavar="NAME", help="Only plugins implementing this hook.")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Each plugin in full (location, entry point, hooks, core range) with the traceback"
    " of a failed import. SRT_TRACE_PLUGINS=1 does the same.",
)
def list_plugins(as_json: bool, show_all: bool, hook: str | None, verbose: bool) -> None:
    """Every installed plugin: version, status and what it provides, sorted by name.

    Imports every plugin the controls allow, so a plugin that fails to import shows as
    `failed` with its error instead of surprising a later command. Status is one of
    loaded, blocked, not allowed, incompatible, failed. Exit status 1 when a plugin failed
    or two plugins register the same name.
    """
    from srt_services import __version__
    from srt_services.cli.plugin_views import inventory_text
    from srt_services.cli.tables import terminal_width
    from srt_services.plugins.manager import default_plugins

    if hook is not None and not hook.startswith("srt_"):
        hook = f"srt_{hook}"
    verbose = verbose or os.environ.get("SRT_TRACE_PLUGINS") == "1"
    plugin_set = default_plugins()
    with _plugin_warnings_shown_by_caller():
        records = plugin_set.inventory(include_builtin=show_all)
    records.sort(key=lambda r: (not _builtin(r), r.key, r.entry_name))
    clashes = plugin_set.clashes()
    if hook is not None:
        records = [r for r in records if hook in r.hooks or r.declares("hook", hook)]
        shown = {r.dist + " " + r.version for r in records}
        clashes = [c for c in clashes if shown & set(c[2])]
    if as_json:
        rows = []
        for record in records:
            row = record.as_dict()
            row["builtin"] = _builtin(record)
            rows.append(row)
        click.echo(json.dumps(rows, indent=2))
    else:
        site_path = getattr(plugin_set.site, "path", None)
        head = [f"srt-services {__version__}; site config: {site_path or 'none'}"]
        for name in ("SRT_DISABLE_PLUGIN_AUTOLOAD", "SRT_PLUGINS", "SRT_DISABLED_PLUGINS"):
            if name in os.environ:
                head.append(f"{name}={os.environ[name]}")
        if not records:
            what = f"implementing {hook}" if hook else "installed"
            head.append("")
            head.append(
                f"no plugins {what}" + ("" if show_all else " (--all shows the built-in one)")
            )
            click.echo("\n".join(head))
            return
        sys.stdout.write(
            "\n".join(head) + "\n\n" + inventory_text(records, clashes, verbose, terminal_width())
        )
    if any(r.status == "failed" or set(r.problems) - set(r.clashes) for r in records) or clashes:
        raise SystemExit(1)


def _builtin(record: PluginRecord) -> bool:
    return record.entry_name == "builtin" and record.dist == "srt-services"


# --------------------------------------------------------------------------- lock / check


def _installed_lock() -> Lock:
    """The installed plugin set, from metadata alone (no plugin is imported, and the site
    config is not read: an admin may be writing the very lock it points at)."""
    from srt_services import __version__
    from srt_services.plugins.discovery import scan
    from srt_services.plugins.lockfile import lock_of

    return lock_of([r.fresh() for r in scan()], __version__)


@plugins.command("lock")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    default="-",
    show_default=True,
    help="Write the lock here ('-': standard output).",
)
def lock(output: str) -> None:
    """Write the installed plugin set (name, version, a hash of each one's files) as a lock.

    Point the site config's `plugins.lock` at it to refuse any other plugin set, and run
    `srt plugins check` to see what changed since. No plugin is imported.
    """
    from srt_services.plugins.lockfile import write_lock

    current = _installed_lock()
    if output == "-":
        sys.stdout.write(current.to_json())
        return
    write_lock(output, current)
    sys.stderr.write(f"srt plugins lock: wrote {len(current.plugins)} plugin(s) to {output}\n")


def _site_set(lock_in_use: str | None) -> tuple[list[Difference], str | None, PluginSet | None]:
    """The site config's rules broken by the environment, without importing a plugin, and
    the plugin set they were decided in (``None`` when the site config is unreadable)."""
    from srt_services import site_config
    from srt_services.errors import SrtError
    from srt_services.plugins.lockfile import Difference
    from srt_services.plugins.manager import PluginSet

    try:
        site = site_config.current()
    except SrtError as exc:
        return [Difference("site", "site config", detail=str(exc))], None, None
    site_lock = site.plugins.lock
    if site_lock is not None and lock_in_use is not None and _same_file(site_lock, lock_in_use):
        # Compared line by line already; the load-time lock rules would repeat it.
        site = _without_lock(site)
    try:
        plugin_set = PluginSet(site=site)
    except SrtError as exc:
        return [Difference("site", "site config", detail=str(exc))], site.path, None
    out = [Difference("site", name, detail=detail) for name, detail in plugin_set.site_problems()]
    return out, site.path, plugin_set


def _working_set(plugin_set: PluginSet, reported: set[str], imports: bool) -> list[Difference]:
    """Plugins that cannot load: outside their core range or the lock's files (metadata),
    and, when ``imports``, those that fail to import or register, and clashing names."""
    from srt_services import __version__
    from srt_services.plugins.lockfile import Difference

    out: list[Difference] = []
    controls = plugin_set.controls
    for record in plugin_set.records:
        if record.status == "discovered" and controls is not None:
            controls.admit(record, __version__)
    if imports:
        with _plugin_warnings_shown_by_caller():
            plugin_set.load_all()
    for record in sorted(plugin_set.records, key=lambda r: r.key):
        label = f"{record.dist} {record.version}"
        if record.status == "incompatible" and label not in reported:
            out.append(Difference("incompatible", record.dist, None, record.version, record.reason))
        elif record.status == "failed":
            detail = f"{record.reason}: {record.error}" if record.reason else str(record.error)
            if record.traceback:
                detail += " (`srt plugins list -v` shows the traceback)"
            out.append(Difference("failed", record.dist, None, record.version, detail))
    for capability, name, owners in plugin_set.clashes():
        out.append(
            Difference(
                "clash",
                f"{capability} {name!r}",
                detail=f"registered by both {' and '.join(owners)}; uninstall one, or block it"
                " (plugins.block in the site config, SRT_DISABLED_PLUGINS)",
            )
        )
    return out


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _without_lock(site: Any) -> Any:
    from dataclasses import replace

    return replace(site, plugins=replace(site.plugins, lock=None))


@plugins.command("check")
@click.option(
    "--lock",
    "lock_path",
    type=click.Path(dir_okay=False),
    help="Lock file to compare with (default: the site config's plugins.lock).",
)
@click.option(
    "--metadata-only",
    is_flag=True,
    help="Import no plugin (for a venv you do not trust yet): failures to import and"
    " clashing names, which only an import shows, are then not checked.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check(lock_path: str | None, metadata_only: bool, as_json: bool) -> None:
    """Check the installed plugins against a lock file and the site config, and that each
    allowed one loads; exit 1 on any difference.

    Shows plugins added, removed, at another version or with changed files since the lock
    was written, site requirements (`plugins.require`) that are not met, plugins outside
    their supported core range, and, with or without a lock, plugins that fail to import
    and names two plugins register. Blocked and not-allowed plugins are never imported.
    """
    from srt_services import site_config
    from srt_services.errors import SrtError

    if lock_path is None:
        try:
            lock_path = site_config.current().plugins.lock
        except SrtError:
            lock_path = None
    notes: list[str] = []
    if lock_path is not None:
        differences, lock_drift = _lock_differences(lock_path)
    else:
        differences, lock_drift = [], False
        notes.append("no lock file (--lock, or plugins.lock in the site config)")
    site_diffs, site_path, plugin_set = _site_set(lock_path)
    differences.extend(site_diffs)
    if plugin_set is not None:
        reported = {d.name for d in site_diffs}
        differences.extend(_working_set(plugin_set, reported, imports=not metadata_only))
    if metadata_only:
        notes.append("--metadata-only: no plugin imported; import failures and clashes unchecked")
    if as_json:
        doc = {
            "ok": not differences,
            "lock": lock_path,
            "site_config": site_path,
            "imported": not metadata_only,
            "notes": notes,
            "differences": [d.as_dict() for d in differences],
        }
        click.echo(json.dumps(doc, indent=2))
    else:
        click.echo(_check_text(lock_path, site_path, notes, differences, lock_drift))
    if differences:
        raise SystemExit(1)


def _lock_differences(lock_path: str) -> tuple[list[Difference], bool]:
    """What differs between the lock at ``lock_path`` and the installed plugins, and
    whether any of it is drift (as opposed to a lock that cannot be read or is outdated):
    only drift is fixed by writing the lock again."""
    from srt_services.plugins.lockfile import Difference, LockError, compare, read_lock

    try:
        locked = read_lock(lock_path)
    except LockError as exc:
        return [Difference("site", "lock", detail=str(exc))], False
    differences = compare(locked, _installed_lock())
    lock_drift = bool(differences)
    if locked.format < 2:
        differences.append(
            Difference(
                "site",
                "lock",
                detail=f"{lock_path} is a format-{locked.format} lock (RECORD hashes,"
                " which change with how a wheel is installed and miss an edited file);"
                f" rewrite it with `srt plugins lock -o {lock_path}`",
            )
        )
    return differences, lock_drift


def _check_text(
    lock_path: str | None,
    site_path: str | None,
    notes: list[str],
    differences: list[Difference],
    lock_drift: bool,
) -> str:
    """`srt plugins check`'s report for a reader: what was compared, then each difference."""
    against = [f"the lock {lock_path}"] if lock_path else []
    against.append(f"the site config {site_path}" if site_path else "no site config")
    lines = [f"srt plugins check: installed plugins against {' and '.join(against)}"]
    lines += [f"  note: {n}" for n in notes]
    lines += [f"  {d.render()}" for d in differences]
    if not differences:
        lines.append("ok: no differences")
        return "\n".join(lines)
    lines.append(f"{len(differences)} difference(s)")
    if lock_drift:
        lines.append(
            f"after an intended change, accept the installed set: srt plugins lock -o {lock_path}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- new

_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
_SLOT_RE = re.compile(r"\{\{\s*([A-Za-z_]+)\s*\}\}")


def template_dir(explicit: str | None = None) -> Path:
    """Where the plugin skeleton lives: ``--template``, else the one in this package
    (``srt_services/_template/skeleton``, package data of every wheel and sdist)."""
    if explicit:
        base = Path(explicit)
        for candidate in (base / "skeleton", base):
            if (candidate / "pyproject.toml").is_file():
                return candidate
        raise click.UsageError(f"--template {explicit}: no pyproject.toml in it or in skeleton/")
    import srt_services

    shipped = Path(srt_services.__file__).resolve().parent / "_template" / "skeleton"
    if not (shipped / "pyproject.toml").is_file():
        raise click.UsageError(
            f"the plugin template is missing from this srt install ({shipped}); reinstall"
            " srt-services, or pass --template DIR"
        )
    return shipped


def template_values(name: str) -> dict[str, str]:
    from srt_services import __version__

    major, minor = (int(p) for p in __version__.split(".")[:2])
    words = name.split("-")
    return {
        "name": name,
        "dist": f"srt-{name}",
        "package": "srt_" + name.replace("-", "_"),
        "kind": name,
        "Class": "".join(w.capitalize() for w in words) + "Kind",
        "ENV": name.upper().replace("-", "_"),
        "core_range": f">={major}.{minor},<{major + 1}",
        "core_version": __version__,
    }


def render_template(text: str, values: dict[str, str], where: str) -> str:
    def sub(m: re.Match[str]) -> str:
        key = m.group(1)
        if key not in values:
            raise click.ClickException(f"template {where}: unknown slot {{{{{key}}}}}")
        return values[key]

    return _SLOT_RE.sub(sub, text)


def generate_plugin(name: str, output: Path, template: Path) -> list[Path]:
    """Write the package for plugin ``name`` under ``output``; returns the files written."""
    values = template_values(name)
    written: list[Path] = []
    for src in sorted(template.rglob("*")):
        rel = src.relative_to(template)
        if src.is_dir() or "__pycache__" in rel.parts or src.suffix in {".pyc", ".pyo"}:
            continue
        target_rel = Path(*(render_template(p, values, str(rel)) for p in rel.parts))
        if target_rel.suffix == ".tmpl":
            target_rel = target_rel.with_suffix("")
        target = output / target_rel
        target.parent.mkdir(parents=True, exist_ok=True)
        text = src.read_text(encoding="utf-8")
        target.write_text(render_template(text, values, str(rel)), encoding="utf-8")
        written.append(target)
    return written


@plugins.command("new")
@click.argument("name")
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(file_okay=False),
    default=".",
    show_default=True,
    help="Directory to create srt-NAME/ in.",
)
@click.option("--template", type=click.Path(file_okay=False), help="Use another template dir.")
@click.option("--force", is_flag=True, help="Write into an existing non-empty directory.")
def new(name: str, output: str, template: str | None, force: bool) -> None:
    """Create a working plugin package srt-NAME providing service kind NAME.

    The package has the entry points (`srt.plugins`, `srt.provides`), the core range, a
    kind with an options model, tests that run the kit's ServiceKindContract, and a README.
    """
    name = name.removeprefix("srt-")
    if not _NAME_RE.match(name):
        raise click.BadParameter(
            "lower-case letters and digits, words joined by '-' (e.g. my-cache)",
            param_hint="NAME",
        )
    skeleton = template_dir(template)
    target = Path(output) / f"srt-{name}"
    if target.exists() and any(target.iterdir()) and not force:
        raise click.ClickException(f"{target} exists and is not empty (use --force)")
    files = generate_plugin(name, target, skeleton)
    values = template_values(name)
    click.echo(f"created {target} ({len(files)} files): distribution {values['dist']},")
    click.echo(f"package {values['package']}, service kind {values['kind']!r}. Next:")
    click.echo(f"  cd {target} && pip install -e '.[test]' && pytest")
    # that install takes core from the package index: say where the way around it is
    click.echo("(core not on your package index yet? README.md, Develop, says what to do)")
