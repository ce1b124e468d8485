"""What every rule family shares during one check: the recipe, the plugins, the findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.recipe.problems import Path, Problem, ProblemList

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.models import Recipe


@dataclass(slots=True)
class RuleContext:
    recipe: Recipe
    plugins: PluginSet
    #: Set for a check beside shape errors (see :func:`srt_services.checking.checks.check`):
    #: the position in the document of each entry of ``recipe.services``, the others
    #: having been left out.
    origin: list[int] | None = None
    #: bounded: a million bad values keep the first problems and count the others
    problems: ProblemList = field(default_factory=ProblemList)

    def add(self, path: Path, message: str, warning: bool = False) -> None:
        self.problems.append(Problem(tuple(path), message, warning))
