"""``load_recipe``: text to a checked recipe, or one :class:`RecipeError` listing everything."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from srt_services.recipe.checks import Settled, check
from srt_services.recipe.models import Recipe
from srt_services.recipe.problems import LocatedProblem, Problem, RecipeError, locate
from srt_services.recipe.pydantic_errors import problems_from
from srt_services.recipe.source import Document, gc_paused, parse_text

if TYPE_CHECKING:
    from srt_services.extend.probe import Probe
    from srt_services.plugins.manager import PluginSet

#: Recipes are small; a 200 MB file is a mistake (or an attack on the parser).
MAX_RECIPE_BYTES = 256 * 1024 * 1024


@dataclass(slots=True)
class LoadedRecipe:
    """A recipe that passed every check, with its services settled."""

    recipe: Recipe
    services: list[Settled]
    document: Document
    warnings: list[LocatedProblem] = field(default_factory=list)
    #: id(readiness/liveness block) -> (probe, validated config), from the checks
    probes: dict[int, tuple[Probe, Any]] = field(default_factory=dict)

    @property
    def source(self) -> str:
        return self.document.source


def read_text(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_RECIPE_BYTES:
            raise RecipeError(
                path,
                [
                    LocatedProblem(
                        "", f"recipe is {size} bytes; refusing more than {MAX_RECIPE_BYTES}"
                    )
                ],
            )
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise RecipeError(path, [LocatedProblem("", "no such file")]) from None
    except IsADirectoryError:
        raise RecipeError(path, [LocatedProblem("", "is a directory, not a recipe file")]) from None
    except OSError as exc:
        raise RecipeError(path, [LocatedProblem("", f"cannot read: {exc.strerror}")]) from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(
            path, [LocatedProblem("", f"is not UTF-8 text (byte {exc.start})")]
        ) from None


def load_recipe(path: str, plugins: PluginSet, text: str | None = None) -> LoadedRecipe:
    """Load and check a recipe file (or ``text`` shown as ``path``)."""
    source = path
    doc = parse_text(read_text(path) if text is None else text, source)
    return check_document(doc, plugins)


def _fail(doc: Document, problems: list[Problem]) -> RecipeError:
    return RecipeError(doc.source, locate(problems, doc.source, doc.data, doc.mark_of))


def check_document(doc: Document, plugins: PluginSet) -> LoadedRecipe:
    """Validate parsed recipe data: the models, then every plugin-aware rule."""
    with gc_paused():
        return _check_document(doc, plugins)


def _check_document(doc: Document, plugins: PluginSet) -> LoadedRecipe:
    data = doc.data
    if not isinstance(data, dict):
        shown = "empty" if data is None else f"a {type(data).__name__}"
        raise _fail(doc, [Problem((), f"a recipe is a mapping of settings; this file is {shown}")])
    if "schema" not in data:
        raise _fail(
            doc,
            [
                Problem(
                    (),
                    "this recipe has no `schema: 2`: it is the v1 layout. Run `srt migrate"
                    f" {doc.source}` to rewrite it, then check the result",
                )
            ],
        )
    if data.get("schema") != 2:
        raise _fail(
            doc, [Problem(("schema",), f"only schema 2 is supported, got {data.get('schema')!r}")]
        )
    try:
        recipe = Recipe.model_validate(data)
    except ValidationError as exc:
        raise _fail(doc, problems_from(exc, Recipe)) from None
    result = check(recipe, plugins)
    located = locate(result.problems, doc.source, data, doc.mark_of)
    errors = [p for p in located if not p.warning]
    if errors:
        raise RecipeError(doc.source, located)
    return LoadedRecipe(
        recipe=recipe,
        services=result.services,
        document=doc,
        warnings=[p for p in located if p.warning],
        probes=result.probes,
    )
