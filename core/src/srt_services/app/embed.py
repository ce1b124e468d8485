"""For plugins that drive srt rather than extend it: load and plan a recipe the way ``srt``
does, and run one probe check, outside a job.

``srt oarbank expose`` plans one service of a recipe and answers protocol operations for
it: it gets the same composition root (site config included) as ``srt dry-run`` and ``srt
run``, and probes from the same plugin set, without reaching into srt's layers. Plugins
import these names from :mod:`srt_services.extend.app`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from srt_services.app import compose
from srt_services.app.compose import Planned
from srt_services.contracts.allocation import Allocation, AllocationRequest
from srt_services.contracts.probe import ProbeResult

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.plugins.manager import PluginSet

__all__ = [
    "Allocation",
    "AllocationRequest",
    "Planned",
    "check_probe",
    "load",
    "plan",
    "plugin_set",
]


def plugin_set() -> PluginSet:
    """The process-wide plugin set (discovered once, plugins imported on demand)."""
    return compose.setup().plugins


def load(recipe: str, plugins: PluginSet | None = None, text: str | None = None) -> LoadedRecipe:
    """Load and check the recipe at ``recipe``, or ``text`` shown under that name."""
    return compose.load(compose.setup(plugins), recipe, text=text)


def plan(
    recipe: str | LoadedRecipe,
    nodes: AllocationRequest | Allocation,
    *,
    job_dir: str = "<job_dir>",
    plugins: PluginSet | None = None,
    local_root: str | None = None,
) -> Planned:
    """Plan ``recipe`` on ``nodes`` as ``srt dry-run`` does, the job directory rendered as
    ``job_dir`` and node-local state under ``local_root`` when given."""
    return compose.plan(
        compose.setup(plugins), recipe, nodes, job_dir=job_dir, local_root=local_root
    )


async def check_probe(
    probe: str,
    config: dict[str, Any],
    *,
    log_path: str = "",
    log_offset: int = 0,
    job_dir: str = "",
    started_wall: float = 0.0,
    attempt_timeout: float = 2.0,
) -> ProbeResult:
    """One attempt of the planned probe ``probe`` (its rendered ``config``), outside a job.

    Listener ownership cannot be checked here (srt did not start the process tree), so a
    port probe trusts the connect, as it does for a remote node.
    """
    from srt_services.supervise.probing import Target

    target = Target(
        config=config,
        log_path=log_path,
        log_offset=log_offset,
        job_dir=job_dir,
        started_wall=started_wall,
        interval=1.0,
        hub=None,
        owner_check=lambda port: None,
    )
    return await plugin_set().probe(probe).check(target, attempt_timeout)
