"""The rules of ``services[].after``: start-up dependencies that the phases cannot express.

Phases order whole groups and, inside a phase, each service waits for the one declared
before it. ``after`` takes a service out of that chain: it waits for exactly the services it
names. Every mistake here would show up at run time as a job that hangs in a phase, so each
is refused at load time instead: a name that is not a running service, a service of a later
phase (it cannot be ready before this phase ends), and a cycle.

Only services that declare ``after`` can form a cycle: a service of the chain waits for its
predecessor in the chain alone, never for a service that left it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from difflib import get_close_matches
from typing import TYPE_CHECKING

from srt_services.recipe.models import PHASES
from srt_services.recipe.problems import Problem

if TYPE_CHECKING:
    from srt_services.checking.settled import Settled
    from srt_services.recipe.models import Recipe


def after_problems(recipe: Recipe, settled: Sequence[Settled]) -> list[Problem]:
    """Every problem of every ``after`` list, given the services the job really runs."""
    declaring = [s for s in settled if s.spec.after]
    if not declaring:  # the common recipe: one pass, nothing built
        return []
    known = _Known(recipe, settled)
    out: list[Problem] = []
    for s in declaring:
        at = (*s.eff.label_path, "after")
        seen: set[str] = set()
        for i, dep in enumerate(s.spec.after or ()):
            if dep in seen:
                message: str | None = f"lists {dep!r} twice"
            else:
                seen.add(dep)
                message = known.problem(s, dep)
            if message is not None:
                out.append(Problem((*at, i), message))
    out.extend(_cycle_problems(declaring, known.phase_of))
    return out


class _Known:
    """What an ``after`` entry may name: the job's services (by phase), and what it may
    not: a switched-off service or one of the job's own processes."""

    __slots__ = ("job_units", "phase_of", "switched_off", "unsettled")

    def __init__(self, recipe: Recipe, settled: Sequence[Settled]) -> None:
        self.phase_of = {s.name: s.start for s in settled}
        self.switched_off = {s.name for s in recipe.services if not s.enabled}
        #: written entries that could not be settled (an unknown type): their own error
        #: says why; waiting for them is not a second problem
        self.unsettled = {
            s.name for s in recipe.services if s.enabled and s.name not in self.phase_of
        }
        self.job_units: set[str] = set(recipe.roles)
        if recipe.frontend is not None and recipe.frontend.type != "none":
            self.job_units.add("frontend")
        if recipe.benchmark.type == "command":
            self.job_units.add("benchmark")

    def problem(self, s: Settled, dep: str) -> str | None:
        """What is wrong with ``s`` waiting for ``dep`` (cycles aside), if anything."""
        phase_of = self.phase_of
        if dep == s.name:
            return "a service cannot wait for itself"
        if dep in phase_of:
            if PHASES.index(phase_of[dep]) <= PHASES.index(s.start):
                return None
            return (
                f"{dep!r} starts in phase {phase_of[dep]}, after this service's"
                f" phase {s.start}, so it cannot be ready first: start this"
                f" service in {phase_of[dep]} or {dep!r} earlier"
            )
        if dep in self.switched_off:
            return f"{dep!r} is switched off (enabled: false)"
        if dep in self.unsettled:
            return None
        if dep in self.job_units:
            return (
                f"{dep!r} is one of the job's own processes, not a service: use"
                " `start: after_frontend` to start once the workers and the frontend"
                " are ready"
            )
        close = get_close_matches(dep, sorted(phase_of), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"{dep!r} names no service of this job{hint}"


def _cycle_problems(declaring: Sequence[Settled], phase_of: Mapping[str, str]) -> list[Problem]:
    by_name = {s.name: s for s in declaring}
    waits = {
        name: [d for d in s.spec.after or () if d != name and phase_of.get(d) == s.start]
        for name, s in by_name.items()
    }
    return [
        Problem(
            (*by_name[cycle[0]].eff.label_path, "after"),
            "these services wait for each other, so none of them would start: "
            + " -> ".join([*cycle, cycle[0]]),
        )
        for cycle in find_cycles(waits)
    ]


def find_cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Cycles of ``edges`` (node -> what it waits for), none sharing a node with another.

    One cycle is enough to show the user what to break; after the fix the next load finds
    the next one. Iterative, so that a chain of ten thousand services cannot exhaust
    Python's stack. Each cycle starts from its member that comes first in ``edges``' order.
    """
    order = {name: i for i, name in enumerate(edges)}
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    found: list[list[str]] = []
    reported: set[str] = set()
    for root in edges:
        if root in state:
            continue
        path: list[str] = []
        stack: list[tuple[str, Iterable[str]]] = [(root, iter(edges.get(root, ())))]
        state[root] = 1
        path.append(root)
        while stack:
            node, todo = stack[-1]
            for nxt in todo:
                if nxt not in edges:
                    continue
                if state.get(nxt) == 1:
                    cycle = path[path.index(nxt) :]
                    if reported.isdisjoint(cycle):
                        reported.update(cycle)
                        first = min(range(len(cycle)), key=lambda i: order[cycle[i]])
                        found.append(cycle[first:] + cycle[:first])
                elif nxt not in state:
                    state[nxt] = 1
                    path.append(nxt)
                    stack.append((nxt, iter(edges[nxt])))
                    break
            else:
                state[node] = 2
                path.pop()
                stack.pop()
    return found
