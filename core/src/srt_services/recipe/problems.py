"""Validation problems and how they are shown.

A problem is recorded against a *document path* (keys and list indices as they appear in
the recipe). The path is turned into a readable label (``services[router].readiness``) and
a ``line:col`` only when the error is shown, so the success path pays nothing for marks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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

    def render(self) -> str:
        errors = self.errors
        lines = [p.render(self.source) for p in errors]
        if len(errors) > 1:
            lines.append(f"{self.source}: {len(errors)} errors")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.render()


#: Problems shown with their place; a recipe with more (one per item of a list of a
#: million) gets these and a count of the rest.
MAX_SHOWN = 100


def locate(
    problems: Iterable[Problem],
    source: str,
    data: Any,
    mark_of: Callable[[Path], tuple[int, int] | None],
) -> list[LocatedProblem]:
    """Attach labels and marks, de-duplicate, and sort by position in the file.

    At most :data:`MAX_SHOWN` problems are located (finding a mark reads the text again);
    the rest are counted in one last entry.
    """
    seen: set[tuple[Path, str]] = set()
    unique: list[Problem] = []
    more = 0
    for p in problems:
        key = (p.path, p.message)
        if key in seen:
            continue
        seen.add(key)
        if len(unique) < MAX_SHOWN:
            unique.append(p)
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
    if more:
        located.append(LocatedProblem("", f"and {more} more problems like these"))
    return located
