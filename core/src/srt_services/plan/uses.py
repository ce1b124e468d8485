"""``uses``: a unit's argv wrapped by the kinds of the services it uses.

Done once every unit is planned, because the wrapper needs the used service's instance on
the user's node (where its agent listens) and the user's own final argv; the plan is final
afterwards like any other. Each used service wraps in the order the entries are written, so
the first entry's admission is asked first and released last. A user on a node where the
service has no instance is refused: an admission is a node's, and nothing would answer it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.recipe.problems import Path, Problem

if TYPE_CHECKING:
    from srt_services.checking.settled import Settled
    from srt_services.contracts.plan import PlannedUnit
    from srt_services.plan.context import PlanContext
    from srt_services.recipe.models import UseSpec


def apply_uses(ctx: PlanContext, units: list[PlannedUnit]) -> list[Problem]:
    """Wrap the argv of every instance of every unit that declares ``uses``; the problems
    of users placed where a used service has no instance."""
    settled = {s.name: s for s in ctx.services}
    planned = {u.name: u for u in units if u.category == "service"}
    problems: list[Problem] = []
    for unit in units:
        found = _declared(ctx, unit, settled)
        if found is None:
            continue
        at, uses = found
        for name, entries, first in _grouped(uses):
            provider = settled.get(name)
            provided = planned.get(name)
            if provider is None or provided is None:
                # checked before planning: only a service this machine cannot run (its
                # kind's skip reason) gets here, and its users cannot run without it
                problems.append(
                    Problem(
                        (*at, first, "service"),
                        f"services[{name}] does not run here (see the plan's warnings), so"
                        f" {unit.label}, which uses it, cannot run either",
                    )
                )
                continue
            on_node = {i.node: i for i in provided.instances}
            for inst in unit.instances:
                there = on_node.get(inst.node)
                if there is None:
                    where = ", ".join(sorted(on_node)) or "no node"
                    problems.append(
                        Problem(
                            (*at, first, "service"),
                            f"{unit.label} runs on {inst.node}, where services[{name}] has no"
                            f" instance (it runs on {where}); an admission is asked of the"
                            " service on the user's own node: place them together",
                        )
                    )
                    break
                inst.argv = provider.kind.use_command(
                    provider.spec, provider.options, entries, there, inst
                )
    return problems


def _declared(
    ctx: PlanContext, unit: PlannedUnit, settled: dict[str, Settled]
) -> tuple[Path, list[UseSpec]] | None:
    """Where the unit's ``uses`` are written and what they say, or ``None`` for none."""
    recipe = ctx.loaded.recipe
    if unit.category == "service":
        s = settled.get(unit.name)
        if s is None or not s.spec.uses:
            return None
        return (*s.eff.label_path, "uses"), s.spec.uses
    if unit.category == "workers":
        role = recipe.roles.get(unit.name)  # type: ignore[call-overload]
        return (("roles", unit.name, "uses"), role.uses) if role is not None and role.uses else None
    # the frontend's replicas, not the balancer in front of them (its own unit)
    frontend = unit.category == "frontend" and unit.name == "frontend"
    if frontend and recipe.frontend is not None and recipe.frontend.uses:
        return ("frontend", "uses"), recipe.frontend.uses
    if unit.category == "benchmark" and recipe.benchmark.uses:
        return ("benchmark", "uses"), recipe.benchmark.uses
    return None


def _grouped(uses: list[UseSpec]) -> list[tuple[str, list[UseSpec], int]]:
    """The entries by service, in the order each service is first named, with the index of
    its first entry (where a problem points). Wrapped innermost-last, so reversed here."""
    order: dict[str, tuple[list[UseSpec], int]] = {}
    for i, use in enumerate(uses):
        order.setdefault(use.service, ([], i))[0].append(use)
    return [(name, entries, first) for name, (entries, first) in reversed(order.items())]
