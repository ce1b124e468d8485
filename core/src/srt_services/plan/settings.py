"""What planning takes besides the recipe, the plugins and the allocation.

Everything here is settled once, by the application layer, before planning starts: the
site config is read there and its values arrive here as plain data, the recipe directory
has its one default there, and the launcher that will run the plan is known there. So the
plan is final when :func:`~srt_services.plan.resolve.resolve` returns: nothing is removed
from it or rewritten afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srt_services.contracts.launcher import Launcher


@dataclass(frozen=True, slots=True)
class PlanSettings:
    #: what ``{job_dir}`` renders to (``<job_dir>`` in a dry run)
    job_dir: str = "<job_dir>"
    #: what ``{recipe_dir}`` renders to; ``None`` only where no recipe file exists (text
    #: given to a test), and then it is the directory of the recipe's source name
    recipe_dir: str | None = None
    #: the site's least readiness budget for probes whose recipe gives none (0: none)
    readiness_floor: float = 0.0
    #: root of node-local storage on every node (``{local_dir}`` lives under it)
    local_root: str = "/tmp"
    #: the site's ``[binaries]``: a server kind's command name -> the path to run
    binaries: Mapping[str, str] = field(default_factory=dict)
    #: the launcher that will run the plan: a unit that sets a launch setting it does not
    #: apply gets a warning in the plan (``None``: no launcher is known, a dry run)
    launcher: type[Launcher] | None = None
    #: the plan runs on this machine now (``srt run``): each kind is asked whether it can
    #: (``ServiceKind.skip_reason``), and a service that cannot is left out, with a warning
    runs_here: bool = False
    #: how a Slurm job starts its instances (``steps`` or ``agents``, chosen by the
    #: application layer from the recipe, the site and the node count; see
    #: :mod:`srt_services.plan.launch_paths`); ``None``: the plan does not run on Slurm
    slurm_launcher: str | None = None
    #: a local plan's network: ``auto``, ``shared`` or ``namespaces`` (see
    #: :mod:`srt_services.plan.netmode`)
    local_network: str = "auto"
    #: why separate network namespaces cannot be made here (``None``: they can); only the
    #: application layer looks, and only for a plan that runs here now
    netns_unavailable: str | None = "not looked at (the plan does not run here now)"
    #: the private subnet a namespaced job's bridge takes (free on this machine when the
    #: application layer chose it)
    local_subnet: str | None = None
