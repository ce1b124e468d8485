"""What ``srt plugins list`` and ``srt plugins check`` show: every plugin with its final
status, what it registered and which commands it adds, the core's own plugin as a record,
and the site rules (``plugins.require``, ``plugins.lock``) the installed set breaks.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import srt_services
from srt_services import __version__ as CORE_VERSION
from srt_services.plugins.discovery import PluginRecord
from srt_services.plugins.loading import label_of
from srt_services.plugins.registry import BUILTIN
from srt_services.plugins.versions import normalize

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from srt_services.plugins.calls import HookCalls
    from srt_services.plugins.discovery import Controls
    from srt_services.plugins.loading import Loader
    from srt_services.plugins.registration import Registration


def builtin_record(builtin: object | None, registration: Registration) -> PluginRecord:
    """The core's own plugin as a record, for ``srt plugins list --all``."""
    package = os.path.dirname(srt_services.__file__ or "?")
    record = PluginRecord(
        dist="srt-services",
        version=CORE_VERSION,
        entry_name="builtin",
        module=getattr(builtin, "__name__", None) or "srt_services.builtin",
        location=os.path.dirname(package),
        status="loaded",
        reason="built in",
        metadata_read=True,
    )
    if builtin is not None and registration.pm.get_plugin(BUILTIN) is not None:
        record.hooks = registration.hooks_of(builtin)
    record.registered = registration.registries.provided_by(BUILTIN)
    return record


def inventory(
    loader: Loader, calls: HookCalls, builtin: Callable[[], PluginRecord] | None = None
) -> list[PluginRecord]:
    """Every plugin with its final status (the core's own first, made by ``builtin``, when
    given): everything allowed is imported first, so that inspection does not depend on what
    a lazy command happened to load."""
    loader.load_all()
    for record in loader.records:
        record.read_metadata()
    loader.ensure_hook("srt_cli_commands")
    commands = _commands(calls, loader.by_label)
    out: list[tuple[str, PluginRecord]] = []
    if builtin is not None:
        out.append((BUILTIN, builtin()))
    out.extend((label_of(r), r) for r in loader.records)
    for label, record in out:
        if label in commands:
            record.registered["command"] = sorted(commands[label])
    return [record for _, record in out]


def _commands(calls: HookCalls, by_label: dict[str, PluginRecord]) -> dict[str, list[str]]:
    """The command names each plugin adds; a plugin whose hook raises gets a problem."""
    commands: dict[str, list[str]] = {}
    for label, results, error in calls.per_plugin("srt_cli_commands", {}):
        if error is not None:
            owner = by_label.get(label)
            if owner is not None:
                owner.problems.append(f"srt_cli_commands raised {type(error).__name__}: {error}")
            continue
        for command in (c for result in results for c in result or ()):
            commands.setdefault(label, []).append(getattr(command, "name", None) or "?")
    return commands


def _required(controls: Controls) -> tuple[dict[str, str], list[str]]:
    """The site's required distributions (normalised name -> requirement), and the
    requirements that cannot be read."""
    from packaging.requirements import InvalidRequirement, Requirement

    required: dict[str, str] = {}
    unreadable: list[str] = []
    for text in controls.require:
        try:
            required[normalize(Requirement(text).name)] = text
        except InvalidRequirement:
            unreadable.append(text)
    return required, unreadable


def missing_required(controls: Controls | None, records: Sequence[PluginRecord]) -> list[str]:
    """Site-required distributions that are not installed at all."""
    if controls is None or not controls.require:
        return []
    from packaging.requirements import InvalidRequirement, Requirement

    present = {r.key for r in records}
    out = []
    for text in controls.require:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            out.append(f"{text} (unreadable requirement)")
            continue
        if normalize(req.name) not in present:
            out.append(text)
    return out


def site_problems(
    controls: Controls | None, records: Sequence[PluginRecord]
) -> list[tuple[str, str]]:
    """(plugin, problem) for every site rule the installed set breaks; imports nothing.

    Covers ``plugins.require`` (missing, wrong version, blocked locally, incompatible
    with this core) and ``plugins.lock`` (a plugin missing, added or at another version).
    """
    if controls is None:
        return []
    required, unreadable = _required(controls)
    out = [(text, "unreadable requirement in plugins.require") for text in unreadable]
    present = {r.key for r in records}
    out.extend(
        (key, f"required by the site config ({text!r}) but not installed")
        for key, text in required.items()
        if key not in present
    )
    for record in records:
        problem = _site_problem(controls, record, required)
        if problem is not None:
            out.append((f"{record.dist} {record.version}", problem))
    if controls.lock is not None:
        out.extend(
            (name, f"in the lock file {controls.lock_path} but not installed")
            for name in controls.lock
            if name not in present
        )
    return out


def _site_problem(controls: Controls, record: PluginRecord, required: dict[str, str]) -> str | None:
    """What is wrong with one installed plugin under the site's rules, if anything.

    A required plugin not yet looked at is admitted (checked, not imported) first.
    """
    if record.key in required and record.status == "discovered":
        controls.admit(record, CORE_VERSION)
    if record.status == "incompatible" and (record.key in required or "plugins." in record.reason):
        return f"incompatible: {record.reason}"
    if record.key in required and record.status in {"blocked", "not allowed"}:
        return f"required by the site config but {record.status} ({record.reason})"
    return None
