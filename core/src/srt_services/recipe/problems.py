"""Validation problems and how they are shown.

A problem is recorded against a *document path* (keys and list indices as they appear in
the recipe). The path is turned into a readable label (``services[router].readiness``) and
a ``line:col`` only when the error is shown, so the success path pays nothing for marks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from srt_services.errors import RecipeInvalid
from srt_services.names import NAME_RE

PathItem = str | int
Path = tuple[PathItem, ...]

#: Lists whose items are labelled by their ``name`` key rather than their index.
NAMED_LISTS = frozenset({"services"})


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a recipe.

    ``path`` points into the raw document; ``at_key`` says whether the mark should be the
    key itself (an unknown key) rather than its value.
    """

    path: Path
    message: str
    warning: bool = False


@dataclass(slots=True)
class LocatedProblem:
    label: str
    message: str
    line: int | None = None
    column: int | None = None
    warning: bool = False
    #: how many problems this entry stands for (the closing "and N more" line: N)
    count: int = 1

    def render(self, source: str) -> str:
        where = source
        if self.line is not None:
            where = f"{source}:{self.line}:{self.column or 1}"
        head = f"{where}: {self.label}: " if self.label else f"{where}: "
        return head + self.message


def label_for(path: Sequence[PathItem], data: Any) -> str:
    """Human label of ``path``: ``services[router].readiness.http.port``."""
    out: list[str] = []
    node = data
    parent_key: PathItem | None = None
    for item in path:
        if isinstance(item, int) and item == 0 and isinstance(node, dict) and 0 not in node:
            parent_key = item
            continue  # one mapping written where a list is accepted (metrics: {...})
        if isinstance(item, int):
            name = None
            if parent_key in NAMED_LISTS and isinstance(node, list) and 0 <= item < len(node):
                entry = node[item]
                # an unsafe name (NUL, newline, '../x') would garble the label: use the index
                if (
                    isinstance(entry, dict)
                    and isinstance(entry.get("name"), str)
                    and NAME_RE.fullmatch(entry["name"])
                ):
                    name = entry["name"]
            out.append(f"[{name if name is not None else item}]")
            node = node[item] if isinstance(node, list) and 0 <= item < len(node) else None
        elif isinstance(item, str) and not item.isprintable():
            out.append(f"[{item!r}]")  # a key with a newline or NUL must not garble the line
            node = node.get(item) if isinstance(node, dict) else None
        else:
            out.append(("." if out else "") + str(item))
            node = node.get(item) if isinstance(node, dict) else None
        parent_key = item
    return "".join(out)


class RecipeError(RecipeInvalid):
    """Every problem found in one recipe, rendered together (sorted by position)."""

    def __init__(self, source: str, problems: list[LocatedProblem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(self.render())

    @property
    def errors(self) -> list[LocatedProblem]:
        return [p for p in self.problems if not p.warning]

    @property
    def error_count(self) -> int:
        """Every error found, the ones only counted included."""
        return sum(p.count for p in self.problems if not p.warning)

    def render(self) -> str:
        errors = self.errors
        lines = [p.render(self.source) for p in errors]
        total = self.error_count
        if total > 1:
            lines.append(f"{self.source}: {total} errors")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


#: Problems shown with their place; a recipe with more (one per item of a list of a
#: million) gets these and a count of the rest.
MAX_SHOWN = 100
#: Distinct problems remembered so that one found again (the same problem of every
#: instance of a service) is counted once; past this many, a repeat may count twice.
MAX_REMEMBERED = 100_000


class ProblemList:
    """Problems as they are found: the first :data:`MAX_SHOWN` errors and as many warnings
    are kept, the others only counted.

    Every rule, the shape check and the planner collect into one of these, so a recipe
    with a million wrong values costs a million counts, not a million problem objects
    (nor a million labels and lines: :func:`locate` only places the ones kept).
    """

    __slots__ = ("_kept", "_seen", "_shown", "more_errors", "more_warnings")

    def __init__(self, problems: Iterable[Problem] = ()) -> None:
        self._kept: list[Problem] = []
        #: the hashes of the problems met so far, to count a repeat once
        self._seen: set[int] = set()
        #: how many errors (False) and warnings (True) are kept
        self._shown = {False: 0, True: 0}
        self.more_errors = 0
        self.more_warnings = 0
        self.extend(problems)

    def append(self, problem: Problem) -> None:
        key = hash(problem)
        full = self._shown[problem.warning] >= MAX_SHOWN
        if key in self._seen and (full or problem in self._kept):
            return  # met before (two problems with one hash would count once: rare enough)
        if len(self._seen) < MAX_REMEMBERED:
            self._seen.add(key)
        if not full:
            self._shown[problem.warning] += 1
            self._kept.append(problem)
        elif problem.warning:
            self.more_warnings += 1
        else:
            self.more_errors += 1

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.append(problem)
        if isinstance(problems, ProblemList):
            self.more_errors += problems.more_errors
            self.more_warnings += problems.more_warnings

    def count_more(self, errors: int) -> None:
        """Errors found but never built (pydantic's beyond the first ones)."""
        self.more_errors += errors

    def __iter__(self) -> Iterator[Problem]:
        return iter(self._kept)

    def __len__(self) -> int:
        return len(self._kept)

    def __bool__(self) -> bool:
        return bool(self._kept) or self.more_errors > 0 or self.more_warnings > 0

    def __contains__(self, problem: object) -> bool:
        return isinstance(problem, Problem) and hash(problem) in self._seen


def locate(
    problems: Iterable[Problem],
    source: str,
    data: Any,
    mark_of: Callable[[Path], tuple[int, int] | None],
) -> list[LocatedProblem]:
    """Attach labels and marks, de-duplicate, and sort by position in the file.

    At most :data:`MAX_SHOWN` errors (and as many warnings) are located (finding a mark
    reads the text again); the rest are counted in one last entry, together with those a
    :class:`ProblemList` only counted.
    """
    seen: set[tuple[Path, str]] = set()
    unique: list[Problem] = []
    more = more_warnings = 0
    if isinstance(problems, ProblemList):
        more, more_warnings = problems.more_errors, problems.more_warnings
    shown = {False: 0, True: 0}
    for p in problems:
        key = (p.path, p.message)
        if key in seen:
            continue
        seen.add(key)
        if shown[p.warning] < MAX_SHOWN:
            shown[p.warning] += 1
            unique.append(p)
        elif p.warning:
            more_warnings += 1
        else:
            more += 1
    prefetch = getattr(getattr(mark_of, "__self__", None), "prefetch_marks", None)
    if prefetch is not None:  # a Document: one pass over the text finds every mark
        prefetch([p.path for p in unique])
    located: list[LocatedProblem] = []
    for p in unique:
        mark = mark_of(p.path)
        located.append(
            LocatedProblem(
                label=label_for(p.path, data),
                message=p.message,
                line=mark[0] if mark else None,
                column=mark[1] if mark else None,
                warning=p.warning,
            )
        )
    located.sort(key=lambda lp: (lp.line or 0, lp.column or 0))
    if more_warnings:
        located.append(
            LocatedProblem(
                "", f"and {more_warnings} more warnings", warning=True, count=more_warnings
            )
        )
    if more:
        located.append(LocatedProblem("", f"and {more} more problems like these", count=more))
    return located
