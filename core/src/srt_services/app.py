"""The composition root: recipe file -> checked recipe -> plan, with the site applied.

``srt validate`` (:func:`verdict`: it plans too), ``dry-run``, ``run``, ``apply`` and
``srt oarbank expose`` all go through here, so a site setting that changes what a plan
says (the readiness floor, the node-local root) is read in one place and cannot be missed
by one of them. Nothing here starts a process.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srt_services.extend.launcher import Launcher
    from srt_services.plan.allocation import Allocation, AllocationRequest
    from srt_services.plan.model import Plan
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.load import LoadedRecipe
    from srt_services.site_config import SiteConfig


@dataclass(frozen=True, slots=True)
class Planned:
    """A recipe, its plan, and the site config the plan was made under."""

    loaded: LoadedRecipe
    plan: Plan
    site: SiteConfig


@contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic collector off from the parse to the written plan.

    Loading and planning a large recipe builds millions of acyclic containers, and every
    collector pass in between rescans all of them; one pause around the whole command
    (pauses nest) saves that, and the collector's state is restored afterwards.
    """
    from srt_services.recipe.source import gc_paused

    with gc_paused():
        yield


def plugin_set() -> PluginSet:
    """The process-wide plugin set (discovered once, plugins imported on demand)."""
    from srt_services.plugins.manager import default_plugins

    return default_plugins()


def site() -> SiteConfig:
    """The site config (``SRT_SITE_CONFIG``, default ``/etc/srt/site.toml``)."""
    from srt_services.site_config import current

    return current()


def load(recipe: str, plugins: PluginSet | None = None, text: str | None = None) -> LoadedRecipe:
    """Load and check the recipe at ``recipe`` (``-``: standard input), or ``text`` shown
    under that name (a migrated recipe before it is written)."""
    from srt_services.recipe.load import load_recipe

    return load_recipe(recipe, plugins or plugin_set(), text=text)


def plan(
    recipe: str | LoadedRecipe,
    nodes: AllocationRequest | Allocation | Callable[[int], Allocation],
    *,
    job_dir: str = "<job_dir>",
    recipe_dir: str | None = None,
    plugins: PluginSet | None = None,
    local_root: str | None = None,
) -> Planned:
    """Plan ``recipe`` on ``nodes`` as the site config says.

    ``nodes`` is a request (symbolic or local nodes), a ready allocation, or a function of
    the node count the recipe needs (a launcher's ``allocation``).

    ``recipe_dir`` is what ``{recipe_dir}`` renders to (default: the recipe file's
    directory, or ``SRT_RECIPE_DIR`` when ``srt apply`` staged a copy elsewhere).

    ``local_root`` replaces the node-local root (``[storage] node_local``,
    ``$SLURM_TMPDIR``, ``/tmp``) for a caller that runs a service outside a job and must
    keep its state in a directory of its own (``srt oarbank expose``: the module's data
    directory), where nothing would remove a job's node-local tree.
    """
    from srt_services.plan.resolve import resolve
    from srt_services.site_config import node_local_root

    plugins = plugins or plugin_set()
    loaded = load(recipe, plugins) if isinstance(recipe, str) else recipe
    config = site()
    result = resolve(
        loaded,
        plugins,
        nodes,
        job_dir,
        recipe_dir=recipe_dir or os.environ.get("SRT_RECIPE_DIR") or None,
        readiness_timeout=config.readiness_timeout,
        local_root=local_root or node_local_root(config),
    )
    return Planned(loaded, result, config)


def verdict(recipe: str, plugins: PluginSet | None = None) -> Planned:
    """What ``srt validate`` answers: the recipe checked, then planned on the smallest
    symbolic allocation that fits it (what ``srt dry-run`` plans without ``--nodes``, and
    the node count ``srt apply`` asks Slurm for).

    The plan-time problems (two listeners on one port of a node, a placement that selects
    no nodes) raise :class:`~srt_services.recipe.problems.RecipeError` with their lines,
    like the load-time ones, so a CI job that runs only ``validate`` has the verdict
    ``dry-run`` and ``run`` would give. Nothing touches the network or the machine.
    """
    from srt_services.plan.allocation import AllocationRequest

    return plan(recipe, AllocationRequest(kind="symbolic"), plugins=plugins)


def for_launcher(planned: Planned, launcher: type[Launcher]) -> list[str]:
    """Adapt a plan to the launcher that will run it; return what the user must be told.

    A unit that sets settings the launcher cannot apply (a container under the local
    launcher) gets a warning; a service whose kind says it cannot run on this machine is
    dropped when it is not critical (and refused when it is).
    """
    from srt_services.errors import SrtError

    notes: list[str] = []
    for s in planned.loaded.services:
        reason = s.kind.skip_reason(s.spec, s.options) if s.options is not None else None
        if reason is None or s.spec.external is not None:
            continue
        if s.critical:
            raise SrtError(f"services[{s.name}] cannot run on this machine: {reason}")
        planned.plan.drop_unit(s.name, reason)
        notes.append(f"services[{s.name}] skipped: {reason}")
    for message in launcher.unapplied(planned.plan):
        planned.plan.warnings.append(message)
        notes.append("warning: " + message)
    return notes
