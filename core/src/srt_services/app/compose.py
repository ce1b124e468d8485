"""The composition root: what every use case settles once, at the top, and passes down.

The site config is read here and nowhere below: its values reach the plugin set (which
plugins may load), the planner (the readiness floor, the node-local root, the site's
binaries, as :class:`~srt_services.plan.settings.PlanSettings`) and the launcher (image
aliases, mounts, srun options, as
:class:`~srt_services.contracts.launcher.LaunchSettings`) as plain data. The recipe
directory has its one default here. The launcher is asked for the allocation here, before
planning, with the node count the recipe needs, and how a Slurm job starts its instances
(an ``srun`` step each, or one agent per node) is chosen here from the recipe, the site and
that allocation, so the plan is final when planning returns. Nothing here starts a process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.contracts.allocation import Allocation, AllocationRequest
    from srt_services.contracts.launcher import Launcher, LaunchSettings
    from srt_services.contracts.plan import Plan
    from srt_services.plan.settings import PlanSettings
    from srt_services.plugins.manager import PluginSet
    from srt_services.site_config import SiteConfig


@dataclass(frozen=True, slots=True)
class Setup:
    """The site config and the plugin set one command works with."""

    site: SiteConfig
    plugins: PluginSet


@dataclass(frozen=True, slots=True)
class Planned:
    """A recipe and its plan."""

    loaded: LoadedRecipe
    plan: Plan


def setup(plugins: PluginSet | None = None, site: SiteConfig | None = None) -> Setup:
    """The site config (``SRT_SITE_CONFIG``, default ``/etc/srt/site.toml``) read once, and
    the plugin set under it: ``plugins`` when given (a test's isolated set), else the
    process-wide one (discovered once, plugins imported on demand)."""
    from srt_services import builtin, site_config
    from srt_services.plugins.manager import default_plugins

    if site is None:
        site = plugins.site if plugins is not None and plugins.site is not None else None
    if site is None:
        site = site_config.current()
    if plugins is None:
        plugins = default_plugins(site, builtins=builtin)
    return Setup(site=site, plugins=plugins)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic collector off from the parse to the written plan.

    Loading and planning a large recipe builds millions of acyclic containers, and every
    collector pass in between rescans all of them; one pause around the whole command
    (pauses nest) saves that, and the collector's state is restored afterwards.
    """
    from srt_services.gcpause import gc_paused

    with gc_paused():
        yield


def load(
    where: Setup, recipe: str, text: str | None = None, variant: str | None = None
) -> LoadedRecipe:
    """Load and check the recipe at ``recipe`` (``-``: standard input), or ``text`` shown
    under that name (a migrated recipe before it is written); one job (``variant`` picks
    it in another tool's sweep file)."""
    from srt_services.checking.load import load_recipe

    return load_recipe(
        recipe, where.plugins, text=text, variant=variant, format_settings=where.site.formats
    )


def load_all(where: Setup, recipe: str, variant: str | None = None) -> list[LoadedRecipe]:
    """Every job of a recipe file: one for srt's own, the selected (default: the other
    tool's default) variants of another tool's sweep file."""
    from srt_services.checking.load import load_variants

    return load_variants(recipe, where.plugins, variant=variant, format_settings=where.site.formats)


def recipe_dir(recipe: str) -> str:
    """What ``{recipe_dir}`` renders to: ``SRT_RECIPE_DIR`` when ``srt apply`` staged a copy
    of the recipe elsewhere (the batch script exports the original directory), else the
    recipe file's directory (the current one for standard input)."""
    return os.environ.get("SRT_RECIPE_DIR") or os.path.dirname(os.path.abspath(recipe))


def plan_settings(
    where: Setup,
    recipe: str,
    *,
    job_dir: str = "<job_dir>",
    launcher: type[Launcher] | None = None,
    runs_here: bool = False,
    local_root: str | None = None,
    slurm_launcher: str | None = None,
) -> PlanSettings:
    """Planning's inputs from the site config and the caller.

    ``local_root`` replaces the node-local root (``[storage] node_local``,
    ``$SLURM_TMPDIR``, ``/tmp``) for a caller that runs a service outside a job and must
    keep its state in a directory of its own (``srt oarbank expose``: the module's data
    directory), where nothing would remove a job's node-local tree.
    """
    from srt_services.plan.settings import PlanSettings
    from srt_services.site_config import node_local_root

    site = where.site
    return PlanSettings(
        job_dir=job_dir,
        recipe_dir=recipe_dir(recipe),
        readiness_floor=site.readiness_timeout or 0.0,
        local_root=local_root or node_local_root(site),
        binaries=dict(site.binaries),
        launcher=launcher,
        runs_here=runs_here,
        slurm_launcher=slurm_launcher,
    )


def slurm_launcher(where: Setup, loaded: LoadedRecipe, allocation: Allocation) -> str | None:
    """How a plan for Slurm (a real or a symbolic allocation) starts its instances: the
    recipe's ``slurm.launcher``, else the site's, else ``agents`` above the site's node
    count; ``None`` for a plan that runs on this machine."""
    from srt_services.plan.launch_paths import choose

    if allocation.kind not in ("slurm", "symbolic"):
        return None
    site = where.site.slurm
    nodes = len(allocation.nodes)
    return choose(loaded.recipe.slurm.launcher, site.launcher, site.agents_above_nodes, nodes)


def launch_settings(where: Setup, cookie: str = "") -> LaunchSettings:
    """What the launcher is told besides the plan (the site's part of it, and the run's
    cookie)."""
    from srt_services.contracts.launcher import LaunchSettings

    site = where.site
    return LaunchSettings(
        cookie=cookie,
        container_aliases=dict(site.container_aliases),
        container_mounts=tuple(site.container_mounts),
        srun_extra=tuple(site.slurm.srun_extra),
        network_interface=site.slurm.network_interface,
        agent_start_timeout=site.slurm.agent_start_timeout,
        agent_lost_after=site.slurm.agent_lost_after,
    )


def plan(
    where: Setup,
    recipe: str | LoadedRecipe,
    nodes: AllocationRequest | Allocation,
    *,
    job_dir: str = "<job_dir>",
    launcher: type[Launcher] | None = None,
    runs_here: bool = False,
    local_root: str | None = None,
    local_network: str | None = None,
) -> Planned:
    """Plan ``recipe`` on ``nodes``: a request (symbolic or local nodes) that ``launcher``
    (when given) turns into its allocation of as many nodes as the recipe needs, or a
    ready allocation. ``local_network`` (``srt run --local-network``) replaces the site's
    ``[local] network`` for a local plan that runs here."""
    from srt_services.contracts.allocation import AllocationRequest
    from srt_services.plan.resolve import node_needs, resolve

    loaded = load(where, recipe) if isinstance(recipe, str) else recipe
    needs = node_needs(loaded, where.plugins)
    if not isinstance(nodes, AllocationRequest):
        allocation = nodes
    elif launcher is not None:
        allocation = launcher.allocation(nodes, needs.total, launch_settings(where))
    else:
        allocation = nodes.build(needs.total)
    settings = plan_settings(
        where,
        loaded.source,
        job_dir=job_dir,
        launcher=launcher,
        runs_here=runs_here,
        local_root=local_root,
        slurm_launcher=slurm_launcher(where, loaded, allocation),
    )
    if runs_here and allocation.kind == "local":
        settings = local_network_settings(where, settings, local_network, len(allocation.nodes))
    return Planned(loaded, resolve(loaded, where.plugins, allocation, settings, needs))


def local_network_settings(
    where: Setup, settings: PlanSettings, requested: str | None, nodes: int = 2
) -> PlanSettings:
    """What planning needs to choose a local job's network: the mode asked for (the flag,
    else the site's), whether this machine can make namespaces and a free private subnet.

    Asked here, once, because both read the machine (capabilities, routes) and planning
    reads nothing. Namespaces asked for explicitly but impossible are refused here, before
    anything starts. ``nodes``: how many virtual nodes the allocation has."""
    import dataclasses

    from srt_services.errors import SrtError
    from srt_services.launch import netns
    from srt_services.plan.netmode import tag

    mode = requested or where.site.local_network
    if mode == "shared" or (mode == "auto" and nodes < 2):
        # one virtual node collides with nothing: the machine is not even looked at
        return dataclasses.replace(settings, local_network=mode)
    reason = netns.unavailable()
    subnet = None
    if reason is None:
        subnet = netns.pick_subnet(tag(settings.job_dir))
        if subnet is None:
            reason = "no private /24 in 10.200.0.0-10.249.255.255 is free of this machine's routes"
    if mode == "namespaces" and reason is not None:
        source = "--local-network" if requested else f"[local] network in {where.site.path}"
        raise SrtError(f"{source} asks for network namespaces per virtual node, but {reason}")
    return dataclasses.replace(
        settings, local_network=mode, netns_unavailable=reason, local_subnet=subnet
    )
