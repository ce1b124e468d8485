"""Problems found in a recipe, each tied to the path of the key that caused it.

A recipe author fixes every problem in one edit only if they see every problem at once, and an
editor can point at a line only if it knows which key is wrong; so errors are collected, never
raised one by one, and each carries the key path as a tuple (("resources", "prefill_nodes")).
"""

from __future__ import annotations

from dataclasses import dataclass

KeyPath = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a recipe (or a cluster config), at one key."""

    path: KeyPath
    message: str

    def __str__(self) -> str:
        where = ".".join(str(p) for p in self.path) or "<top>"
        return f"{where}: {self.message}"


class RecipeError(ValueError):
    """Raised with every problem found, so callers can map each path to a YAML position."""

    def __init__(self, problems: list[Problem], source: str = "recipe") -> None:
        self.problems = problems
        self.source = source
        lines = "\n".join(f"  {p}" for p in problems)
        super().__init__(f"invalid {source} ({len(problems)} problem(s)):\n{lines}")


class ClusterConfigError(RecipeError):
    """An invalid srtslurm.yaml; srtctl ignores it silently, srt refuses it (see DIFFERENCES.md)."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems, source="cluster config (srtslurm.yaml)")
