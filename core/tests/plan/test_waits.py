"""The start-up waits of a phase: whatever ``after`` lists the checks accept, a phase can start.

The checks look for cycles among the services that declare ``after`` only; this test holds
them to the claim that makes that enough: the declared-order chain never closes a cycle.
"""

from __future__ import annotations

from graphlib import CycleError, TopologicalSorter

from hypothesis import given, settings
from hypothesis import strategies as st
from srt_services.checking.rules.after import find_cycles
from srt_services.contracts.plan import PlannedUnit
from srt_services.plan.waits import phase_waits


def unit(name: str, after: list[str] | None) -> PlannedUnit:
    return PlannedUnit(
        name=name,
        category="service",
        type="generic",
        phase="after_frontend",
        tier=0,
        critical=False,
        terminal=False,
        stop_grace=30.0,
        instances=[],
        after=after,
    )


@st.composite
def phases(draw: st.DrawFn) -> list[PlannedUnit]:
    count = draw(st.integers(1, 12))
    names = [f"s{i}" for i in range(count)]
    out = []
    for name in names:
        others = [n for n in names if n != name]
        after = draw(
            st.none() | st.lists(st.sampled_from(others), unique=True)
            if others
            else st.none() | st.just([])
        )
        out.append(unit(name, after))
    return out


@settings(max_examples=400, derandomize=True, database=None)
@given(phases())
def test_no_cycle_among_after_lists_means_the_phase_can_start(units: list[PlannedUnit]) -> None:
    names = [u.name for u in units]
    by_name = {u.name: u for u in units}
    explicit = {u.name: u.after for u in units if u.after is not None}
    waits = phase_waits(names, by_name)
    assert set(waits) == set(names)
    assert all(dep in by_name for deps in waits.values() for dep in deps)
    try:
        order = list(TopologicalSorter(waits).static_order())
    except CycleError:
        assert find_cycles(explicit), "a cycle that the checks missed"
    else:
        assert not find_cycles(explicit), "the checks refused a phase that can start"
        assert sorted(order) == sorted(names)


def test_chain_services_wait_for_the_previous_chain_service_only() -> None:
    units = [unit("a", None), unit("b", []), unit("c", None), unit("d", ["e"]), unit("e", None)]
    waits = phase_waits([u.name for u in units], {u.name: u for u in units})
    assert waits == {"a": [], "b": [], "c": ["a"], "d": ["e"], "e": ["c"]}
