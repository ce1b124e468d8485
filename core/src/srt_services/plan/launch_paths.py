"""Which way a Slurm job starts each instance, settled when the plan is made.

``steps``: every instance is an ``srun`` step of its own. ``agents``: one srt agent per
node starts its node's instances, except an instance that needs what only ``srun`` can
apply (an image through pyxis, a CPU count or binding, raw srun options): that one is
still a step of its own. The choice is the recipe's ``slurm.launcher``, else the site's
``[slurm] launcher``, else ``agents`` for a job of more than the site's
``agents_above_nodes`` nodes. A plan that does not run in a Slurm allocation (``srt run``
on this machine) records no choice.
"""

from __future__ import annotations

from collections.abc import Iterable

from srt_services.contracts.plan import PlannedInstance, PlannedUnit

#: What only ``srun`` applies: an instance that sets one of these is a step of its own
#: (``nodes``: one launch across several nodes, which no node's agent can start).
STEP_ONLY = ("container", "cpus_per_task", "cpu_bind", "srun_options", "nodes")


def choose(recipe: str | None, site: str | None, agents_above: int, nodes: int) -> str:
    """The job's launcher: the recipe's word, else the site's, else by size."""
    return recipe or site or ("agents" if nodes > agents_above else "steps")


def own_step_reason(instance: PlannedInstance) -> str | None:
    """Why ``instance`` needs a step of its own under the agents (``None``: it does not)."""
    for key in STEP_ONLY:
        if getattr(instance, key):
            return key
    return None


def assign(units: Iterable[PlannedUnit], launcher: str) -> None:
    """Record on every instance which way it starts (``agent`` or ``step``)."""
    for unit in units:
        for inst in unit.instances:
            inst.via = "agent" if launcher == "agents" and own_step_reason(inst) is None else "step"
