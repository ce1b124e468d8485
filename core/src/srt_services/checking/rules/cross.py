"""Rules between services, which need every entry of the job (never run beside shape errors).

Services that share the infra node must agree on whether it is dedicated; a pool must be
owned by a service that declares ``nodes``; a terminal service ends the job, so the job
cannot also run a benchmark; ``after`` lists must name services that can start first
(:mod:`.after`); ``uses`` entries must name a service that accepts them and is up first
(:mod:`.uses`); and each plugin may judge the recipe as a whole.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.checking.rules.after import after_problems
from srt_services.checking.rules.uses import check_uses
from srt_services.errors import PluginError

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.checking.settled import Settled


def check_cross(ctx: RuleContext, settled: list[Settled]) -> None:
    _infra_agrees(ctx, settled)
    _pools_owned(ctx, settled)
    terminal = [s for s in settled if s.spec.terminal]
    benchmark = ctx.recipe.benchmark.type
    if terminal and benchmark != "manual":
        for s in terminal:
            ctx.add(
                (*s.eff.label_path, "terminal"),
                "ends the job when the service exits, so the job cannot also run"
                f" benchmark.type: {benchmark}; drop one of them",
            )
    ctx.problems.extend(after_problems(ctx.recipe, settled))
    check_uses(ctx, settled)
    try:
        ctx.problems.extend(ctx.plugins.validate_recipe(ctx.recipe))
    except PluginError as exc:
        ctx.add(("services",), str(exc))


def _infra_agrees(ctx: RuleContext, settled: list[Settled]) -> None:
    """Services sharing the infra node that write a placement are all dedicated, or none is.

    An entry that leaves ``placement.node`` to its kind (``infra``) follows the others: the
    infra node is the dedicated node when one is reserved, so the specification's example
    (etcd and NATS dedicated, a declared ``mooncake-master`` as it comes) shares one node.
    Only a written ``head`` or ``infra`` beside a written ``dedicated`` says two things.
    """
    infra = [
        s
        for s in settled
        if s.kind.shares_infra_node
        and s.spec.external is None
        and s.eff.path is not None
        and s.spec.placement is not None
        and s.spec.placement.node is not None
    ]
    flags = {s.placement == "dedicated" for s in infra}
    if len(flags) <= 1:
        return
    ded = [s.name for s in infra if s.placement == "dedicated"]
    other = [s.name for s in infra if s.placement != "dedicated"]
    for s in infra:
        if s.placement != "dedicated":
            ctx.add(
                (*s.eff.label_path, "placement"),
                f"services {', '.join(ded)} and {', '.join(other)} must agree on"
                " placement.node: dedicated (they share the infra node)",
            )


def _pools_owned(ctx: RuleContext, settled: list[Settled]) -> None:
    # an entry whose type is unknown is not settled (its own error says so), but it still
    # declares its pool: the services placed on it get no second, misleading error
    owners = {s.name for s in settled if s.spec.nodes is not None} | {
        spec.name for spec in ctx.recipe.services if spec.enabled and spec.nodes is not None
    }
    for s in settled:
        if s.placement == "pool" and s.pool not in owners:
            listed = ", ".join(sorted(owners)) or "none"
            ctx.add(
                (*s.eff.label_path, "placement", "pool"),
                f"{s.pool!r} names no service that declares nodes (pools: {listed})",
            )
