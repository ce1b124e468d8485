"""``srt validate``: the verdict on a recipe, without running anything."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services.app import compose

if TYPE_CHECKING:
    from srt_services.app.compose import Planned, Setup


@dataclass(frozen=True, slots=True)
class ValidateRequest:
    #: a recipe file, or ``-`` for standard input
    recipe: str
    #: another tool's sweep file: the variants to check (default: the tool's default set)
    variant: str | None = None


def verdicts(where: Setup, request: ValidateRequest) -> list[Planned]:
    """:func:`verdict` for every job of the file (each variant of a sweep)."""
    from srt_services.contracts.allocation import AllocationRequest

    with compose.collector_paused():
        return [
            compose.plan(where, loaded, AllocationRequest(kind="symbolic"))
            for loaded in compose.load_all(where, request.recipe, request.variant)
        ]


def verdict(where: Setup, request: ValidateRequest) -> Planned:
    """The recipe checked, then planned on the smallest symbolic allocation that fits it
    (what ``srt dry-run`` plans without ``--nodes``, and the node count ``srt apply`` asks
    Slurm for).

    The plan-time problems (two listeners on one port of a node, a placement that selects
    no nodes) raise :class:`~srt_services.recipe.problems.RecipeError` with their lines,
    like the load-time ones, so a CI job that runs only ``validate`` has the verdict
    ``dry-run`` and ``run`` would give. Nothing touches the network or the machine.
    """
    from srt_services.contracts.allocation import AllocationRequest

    with compose.collector_paused():
        loaded = compose.load(where, request.recipe, variant=request.variant)
        return compose.plan(where, loaded, AllocationRequest(kind="symbolic"))
