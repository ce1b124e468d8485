"""Load and plan a recipe the way ``srt`` does, and run one probe check, from a plugin.

For plugins that drive srt rather than extend it (``srt oarbank expose`` plans one service
of a recipe and answers protocol operations for it): they get the same composition root
(site config included) as ``srt dry-run`` and ``srt run``, and probes from the same plugin
set, without reaching into srt's layers.
"""

from __future__ import annotations

from typing import Any

from srt_services.app import Planned, load, plan, plugin_set
from srt_services.extend.probe import ProbeResult
from srt_services.plan.allocation import Allocation, AllocationRequest

__all__ = [
    "Allocation",
    "AllocationRequest",
    "Planned",
    "check_probe",
    "load",
    "plan",
    "plugin_set",
]


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
