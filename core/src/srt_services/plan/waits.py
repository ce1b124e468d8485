"""Who waits for whom when a phase starts: the declared-order chain and ``after`` lists.

The orchestrator asks this at the start of each phase. It is a pure function of the plan,
so the start order can be tested without starting anything. The recipe checks
(``recipe.rules.after``) have already refused every ``after`` that could make a phase hang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from srt_services.contracts.plan import PlannedUnit


def phase_waits(names: Sequence[str], units: Mapping[str, PlannedUnit]) -> dict[str, list[str]]:
    """For each unit of a phase, launched in ``names`` order, the units it must see ready.

    A unit without ``after`` waits for the unit without ``after`` before it (which waited
    for its own predecessor, and so on): the spec's "a service with readiness blocks the
    ones declared after it". A unit with ``after`` left that chain and waits for the units
    it names that are in this phase: those of earlier phases are ready already, and a unit
    the runtime dropped (a kind that cannot run here) has nothing to wait for.
    """
    present = set(names)
    waits: dict[str, list[str]] = {}
    previous: str | None = None
    for name in names:
        after = units[name].after
        if after is None:
            waits[name] = [previous] if previous is not None else []
            previous = name
        else:
            waits[name] = [d for d in after if d in present]
    return waits


def is_chain(names: Sequence[str], units: Mapping[str, PlannedUnit]) -> bool:
    """True when no unit of the phase declares ``after``: one unit after another."""
    return all(units[n].after is None for n in names)
