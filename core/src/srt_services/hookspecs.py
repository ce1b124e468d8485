"""Every hook srt calls, in one place (pluggy project name ``srt``).

Plugins implement these with ``@srt_services.hookimpl`` in the module their ``srt.plugins``
entry point names. Core calls them only through the typed facade
:class:`srt_services.plugins.manager.PluginSet`; nothing else in srt touches
``pm.hook`` directly. The core's own behaviour (the ``generic`` kind, the placements, the
probes, the launchers) is registered through these same hooks by
:mod:`srt_services.plugins.builtin`, so a third-party kind takes exactly the path a
built-in one does.

Registration hooks return *classes*, each carrying a unique ``name``; the facade checks that
names are unique across plugins and reports both owners when they are not. Hooks are only
ever extended by adding optional arguments (pluggy passes only the arguments an
implementation names), so a plugin written against an older core keeps working.

Argument types are imported for type checking only, which keeps this module (and therefore
``srt --help``) free of pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from srt_services.extend.expansion import Expansion
    from srt_services.extend.implied import ImpliedService
    from srt_services.extend.kind import ServiceKind
    from srt_services.extend.launcher import Launcher
    from srt_services.extend.placement import Placement
    from srt_services.extend.probe import Probe
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem

PROJECT = "srt"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------- registration
# Called once per process, the first time srt needs the registry in question. Return a list
# of classes; returning an empty list (or not implementing the hook) is fine.


@hookspec
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    """Service kinds this plugin provides (subclasses of ``ServiceKind``).

    A recipe entry's ``type:`` is looked up by the class's ``name``. Two plugins registering
    the same name is an error naming both.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_placements() -> list[type[Placement]]:
    """Placement resolvers: a ``placement.node`` value to the nodes it selects.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_expansions() -> list[type[Expansion]]:
    """Instance expansions: a ``placement.per`` value to the instances on the placed nodes.

    Core registers ``node`` (one instance per node) and ``worker`` (one per engine worker).

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_probes() -> list[type[Probe]]:
    """Readiness/liveness probes: a key of a ``readiness:`` block to its config and check.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_launchers() -> list[type[Launcher]]:
    """Launchers: how a planned instance becomes a running, signallable process.

    Core registers ``local`` and ``slurm``.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_cli_commands() -> list[click.Command]:
    """Extra ``srt`` subcommands (click commands or groups).

    Only called when the user runs a command core does not know, so a plugin's commands never
    slow down ``srt --help``. Keep heavy imports inside the command functions.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


# --------------------------------------------------------------------------- recipes


@hookspec
def srt_implied_services(recipe: Recipe) -> list[ImpliedService]:
    """Services the rest of the recipe implies, each with the reason shown by dry-run.

    Called once per recipe after it passed shape validation; when only some service entries
    fail it, also once on the recipe without them, so that the other entries are checked in
    the same run (what it returns then is used only to settle those entries' types). A
    declared entry with the same name takes the implied one's place; ``enabled: false`` on
    it switches it off. Return :class:`~srt_services.extend.implied.ImpliedService` objects whose ``entry`` is the raw
    mapping a recipe would write (it is validated like a declared entry) and whose
    ``reason`` says which part of the recipe implied it.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_validate_recipe(recipe: Recipe) -> list[Problem]:
    """Cross-entry rules a plugin owns, as problems with document paths.

    Runs after every per-entry check. Each problem is shown with its YAML line, together with
    all other problems, before anything starts.

    .. versionadded:: 1.0
    """
    raise NotImplementedError
