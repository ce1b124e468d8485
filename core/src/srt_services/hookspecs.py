"""Every hook srt calls, in one place (pluggy project name ``srt``).

Plugins implement these with ``@hookimpl`` (import it from :mod:`srt_services.extend`) in
the module their ``srt.plugins`` entry point names. Core calls them only through the typed
facade :class:`srt_services.plugins.manager.PluginSet`, and the facade calls them through
pluggy, so pluggy's rules hold for every hook:

* **Order.** Implementations run ``tryfirst`` ones first, then the rest from the most
  recently registered plugin to the first, then ``trylast`` ones. A hook that returns
  results gives them in that order.
* **Results.** Every hook here collects *all* results: a list with one entry per
  implementation that returned something, ``None`` results skipped. None is
  ``firstresult``.
* **Wrappers.** ``@hookimpl(wrapper=True)`` implementations wrap the whole call (they
  receive the list of results from ``yield`` and return the list to use).
* **Arguments.** An implementation names only the arguments it uses; hooks are extended
  only by adding arguments, so a plugin written against an older core keeps working.

The core's own behaviour (the ``generic`` kind, the placements, the probes, the launchers)
is registered through these same hooks by :mod:`srt_services.builtin`, so a
third-party kind takes exactly the path a built-in one does.

Argument types are imported for type checking only, which keeps this module (and
therefore ``srt --help``) free of pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from srt_services.contracts.benchmark import BenchmarkKind
    from srt_services.contracts.engine import Engine
    from srt_services.contracts.expansion import Expansion
    from srt_services.contracts.formats import RecipeFormat
    from srt_services.contracts.implied import ImpliedService
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.probe import Probe
    from srt_services.contracts.report import ReportSection
    from srt_services.contracts.status import StatusSection
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem

PROJECT = "srt"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------- registration
# Called for one plugin at a time, right after that plugin is registered: for an installed
# plugin when srt first needs something it declares (``srt.provides`` in its metadata: a
# kind a recipe names, a hook a recipe needs), for the built-ins when the plugin set is
# created, for ``PluginSet.register`` at once. pluggy's subset calling runs that plugin's
# implementation alone, so every class returned is known to be its own and a clash of
# names can name both owners. Each class must carry a unique ``name``.


@hookspec
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    """Service kinds this plugin provides.

    Called once, when the plugin is registered.

    :return: subclasses of :class:`~srt_services.extend.ServiceKind` (or
        :class:`~srt_services.extend.ServerKind`); a recipe entry's ``type:`` selects one
        by its ``name``. Two plugins registering the same name is an error naming both;
        a built-in name cannot be taken over.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_placements() -> list[type[Placement]]:
    """Placement resolvers: a ``placement.node`` value to the nodes it selects.

    Called once, when the plugin is registered.

    :return: subclasses of :class:`~srt_services.extend.Placement`, each with a unique
        ``name``.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_expansions() -> list[type[Expansion]]:
    """Instance expansions: a ``placement.per`` value to the instances on the placed nodes.

    Called once, when the plugin is registered. Core registers ``node`` (one instance per
    node) and ``worker`` (one per engine worker).

    :return: subclasses of :class:`~srt_services.extend.Expansion`, each with a unique
        ``name``.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_probes() -> list[type[Probe]]:
    """Readiness and liveness probes: a key of a ``readiness:`` block to its check.

    Called once, when the plugin is registered.

    :return: subclasses of :class:`~srt_services.extend.Probe`, each with a unique
        ``name`` and a ``Config`` model.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_launchers() -> list[type[Launcher]]:
    """Launchers: how a planned instance becomes a running, signallable process.

    Called once, when the plugin is registered. Core registers ``local`` and ``slurm``.

    :return: subclasses of :class:`~srt_services.extend.Launcher`, each with a unique
        ``name``.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_register_engines() -> list[type[Engine]]:
    """Engines: serving stacks that build the job's workers and frontend.

    Called once, when the plugin is registered. ``frontend.type`` selects an engine by its
    ``name``; it then builds every role that writes no ``command`` (for the ``engine.type``
    backends it lists) and the frontend, from ``engine.options`` and each role's
    ``config``.

    :return: subclasses of :class:`~srt_services.extend.Engine`, each with a unique
        ``name``.

    .. versionadded:: 1.1
    """
    raise NotImplementedError


@hookspec
def srt_register_benchmarks() -> list[type[BenchmarkKind]]:
    """Benchmark kinds: the job's last step built from declarative settings.

    Called once, when the plugin is registered. ``benchmark.type`` selects one by its
    ``name`` (``manual`` and ``command`` are core's own).

    :return: subclasses of :class:`~srt_services.extend.BenchmarkKind`, each with a unique
        ``name``.

    .. versionadded:: 1.1
    """
    raise NotImplementedError


@hookspec
def srt_register_recipe_formats() -> list[type[RecipeFormat]]:
    """Recipe formats: recipes of other tools, read as they are written.

    Called once, when the plugin is registered. A document without ``schema`` is offered
    to each format (:meth:`~srt_services.extend.RecipeFormat.recognises`); one that says
    ``format: <name>`` goes to that format alone.

    :return: subclasses of :class:`~srt_services.extend.RecipeFormat`, each with a unique
        ``name``.

    .. versionadded:: 1.1
    """
    raise NotImplementedError


@hookspec
def srt_cli_commands() -> list[click.Command]:
    """Extra ``srt`` subcommands (click commands or groups).

    Called when ``srt`` is asked for a command core does not have (``srt oarbank ...``)
    and by ``srt plugins list``, which shows who provides what; never by ``srt --help`` or
    a core command, so a plugin's commands cost those nothing. Each plugin is called on
    its own (pluggy's subset calling), so a command is attributed to its plugin. Keep heavy
    imports inside the command functions.

    :return: click commands; two plugins offering the same command name is an error
        naming both.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


# --------------------------------------------------------------------------- recipes


@hookspec
def srt_implied_services(recipe: Recipe) -> list[ImpliedService]:
    """Services the rest of the recipe implies, each with the reason dry-run shows.

    Called while a recipe is checked (``srt validate``, ``dry-run``, ``run``, ``apply``),
    once the recipe passed shape validation. When only some service entries fail it, it is
    also called once on the recipe without them, so the other entries are checked in the
    same run; what it returns then only settles those entries' types.

    A declared entry with the same name takes the implied one's place (``enabled: false``
    on it switches it off). The implied services of all plugins are ordered by
    :attr:`~srt_services.extend.ImpliedService.order`, ties in pluggy's call order, and
    launch in that order before the declared ones of their phase.

    :param recipe: the validated recipe, read-only.
    :return: :class:`~srt_services.extend.ImpliedService` objects whose ``entry`` is the
        mapping a recipe would write (validated like a declared entry) and whose ``reason``
        names the part of the recipe that implied it.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


@hookspec
def srt_validate_recipe(recipe: Recipe) -> list[Problem]:
    """Rules across entries that a plugin owns, as problems with document paths.

    Called while a recipe is checked, after every per-entry check passed for every entry
    (so the whole recipe is there to compare against). Each problem is shown with its YAML
    line, together with every other problem, before anything starts.

    :param recipe: the validated recipe, read-only.
    :return: :class:`~srt_services.extend.Problem` objects whose paths start at the
        recipe's root (``("services", 3, "options", "port")``); ``warning=True`` for
        advice that does not stop the job.

    .. versionadded:: 1.0
    """
    raise NotImplementedError


# --------------------------------------------------------------------------- jobs


@hookspec
def srt_report_sections(job_dir: str) -> list[ReportSection]:
    """Sections of ``srt report JOBDIR``'s page that a plugin draws from what it recorded.

    Called once per report, after the job's own files were read (the job may have ended
    long ago, or still run). Read the job with :func:`~srt_services.extend.read_job`;
    return nothing when the job holds nothing of yours (no metrics recorded). Each
    plugin is called on its own: one that raises costs the page its sections only (the
    page says so), never the report.

    :param job_dir: the job directory's absolute path.
    :return: :class:`~srt_services.extend.ReportSection` objects, HTML escaped by the
        plugin, ordered by their ``order``.

    .. versionadded:: 1.1
    """
    raise NotImplementedError


@hookspec
def srt_status_sections(job_dir: str) -> list[StatusSection]:
    """Sections of ``srt status JOBDIR`` below the instances, from what a plugin's services
    of that job can say now (a node agent's admissions and pool use).

    Called once per ``srt status`` (each refresh of ``--watch``), while the job runs or
    after it ended; read the job with :func:`~srt_services.extend.read_job` and return
    nothing when it holds nothing of yours. Be quick: ask a local socket or read a file with
    a short timeout, never wait. Each plugin is called on its own: one that raises costs
    the output its sections only (a line says so), never the status.

    :param job_dir: the job directory's absolute path.
    :return: :class:`~srt_services.extend.StatusSection` objects, ordered by their
        ``order``; ``srt status --json`` lists them under ``sections``.

    .. versionadded:: 1.2
    """
    raise NotImplementedError
