"""``load_recipe``: text to a checked recipe, or one :class:`RecipeError` listing everything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from srt_services.checking import formats
from srt_services.checking.checks import check
from srt_services.checking.settled import JobProbes, Settled
from srt_services.gcpause import gc_paused
from srt_services.recipe import bounds, validation
from srt_services.recipe.models import Recipe
from srt_services.recipe.problems import LocatedProblem, Problem, ProblemList, RecipeError, locate
from srt_services.recipe.pydantic_errors import shape_problems
from srt_services.recipe.reading import read_text, source_name
from srt_services.recipe.source import Document, parse_text

if TYPE_CHECKING:
    from srt_services.checking.rules.engines import SettledBenchmark, SettledEngine
    from srt_services.contracts.formats import Variant
    from srt_services.plugins.manager import PluginSet


@dataclass(slots=True)
class LoadedRecipe:
    """A recipe that passed every check, with its services settled."""

    recipe: Recipe
    services: list[Settled]
    document: Document
    warnings: list[LocatedProblem] = field(default_factory=list)
    #: the bound readiness probes of the frontend and the roles (services carry their own)
    job_probes: JobProbes = field(default_factory=JobProbes)
    #: the engine that builds the workers and frontend without a command, if any
    engine: SettledEngine | None = None
    #: the benchmark plugin behind ``benchmark.type``, if any
    benchmark: SettledBenchmark | None = None
    #: another tool's recipe format the document was translated from, and which of its
    #: jobs this is (``None`` for srt's own recipes)
    format: str | None = None
    variant: Variant | None = None
    #: what srt does differently from that tool for this recipe, for the user
    notes: list[str] = field(default_factory=list)

    @property
    def source(self) -> str:
        return self.document.source


def load_recipe(
    path: str,
    plugins: PluginSet,
    text: str | None = None,
    variant: str | None = None,
    format_settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> LoadedRecipe:
    """Load and check a recipe file (or ``text`` shown as ``path``; ``-`` is stdin): one
    job. Another tool's recipe that holds several jobs (a sweep) needs ``variant``, a
    selector that names one of them. ``format_settings`` is the site's ``[formats]``
    table, by format name."""
    found = load_variants(path, plugins, text, variant, format_settings)
    if len(found) != 1:
        shown = ", ".join(v.variant.selector for v in found if v.variant is not None)
        raise RecipeError(
            found[0].source,
            [
                LocatedProblem(
                    "",
                    f"holds {len(found)} jobs ({shown}): pick one with --variant SELECTOR",
                )
            ],
        )
    return found[0]


def load_variants(
    path: str,
    plugins: PluginSet,
    text: str | None = None,
    variant: str | None = None,
    format_settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[LoadedRecipe]:
    """Every job of a recipe file, checked: one for srt's own recipes, the selected (or
    default) variants of another tool's (:mod:`srt_services.checking.formats`)."""
    source = source_name(path) if text is None else path
    doc = parse_text(read_text(path) if text is None else text, source)
    fmt = formats.format_of(doc, plugins)
    if fmt is None:
        if variant is not None:
            raise formats.fail(
                doc,
                [Problem((), "is a schema-2 recipe: it has one job, so --variant selects nothing")],
            )
        return [check_document(doc, plugins)]
    out = []
    settings = (format_settings or {}).get(fmt.name, {})
    for found in formats.variant_documents(doc, fmt, variant, settings):
        loaded = check_document(found.document, plugins)
        loaded.format = found.format
        loaded.variant = found.variant
        loaded.notes = list(found.notes)
        out.append(loaded)
    return out


def _fail(doc: Document, problems: list[Problem] | ProblemList) -> RecipeError:
    return RecipeError(doc.source, locate(problems, doc.source, doc.data, doc.mark_of))


#: The recipe's top-level keys (``schema`` is the alias of ``schema_version``).
_TOP_LEVEL = frozenset(f.alias or name for name, f in Recipe.model_fields.items())


def _checks_beside(data: dict[str, Any], shape: ProblemList, plugins: PluginSet) -> ProblemList:
    """The plugin-aware problems of the parts of the recipe whose shape is valid, so a user
    fixing a recipe sees all of its problems in one pass rather than a second list (a
    duplicate name, an unknown ``type``) after the first is fixed.

    An unknown top-level key means nothing to any rule, so the checks run as if it were
    not there: a typo such as ``servcies:`` beside a real ``services:`` list does not hide
    that list's own problems. A service entry with a shape error is left out and the
    checks run on the others, reporting the job's own problems and those of each entry.
    A shape error elsewhere (a role's unknown key, a count out of range) is cut out of
    the document, the rest checked, and only what the service entries' own rules find is
    reported with it: the job-wide rules would judge a job that is not the one written.
    Where cutting cannot make the rest valid (a required setting missing, a whole role or
    section of the wrong type), the later checks wait.
    """
    if shape.more_errors:  # only the first problems are known: the others could be anywhere
        return ProblemList()
    unknown = [k for k in data if k not in _TOP_LEVEL]
    left = list(shape)
    if unknown:
        data = {k: v for k, v in data.items() if k in _TOP_LEVEL}
        left = [p for p in left if p.path[:1] not in {(k,) for k in unknown}]
        if not left:
            try:
                recipe = validation.validate(Recipe, data)
            except ValidationError:  # pragma: no cover - nothing else was wrong with its shape
                return ProblemList()
            return check(recipe, plugins).problems
    outside = [p for p in left if not _in_entry(p)]
    if outside:
        cut = _cut(data, [p.path for p in outside])
        if cut is None:
            return ProblemList()
        data = cut
    entries = data.get("services")
    if not isinstance(entries, list):
        return ProblemList()
    broken = {p.path[1] for p in left if _in_entry(p)}
    kept = [i for i in range(len(entries)) if i not in broken]
    try:
        recipe = validation.validate(Recipe, {**data, "services": [entries[i] for i in kept]})
    except ValidationError:  # the cut did not make the rest valid: nothing more is sure
        return ProblemList()
    found = check(recipe, plugins, origin=kept).problems
    # the job's own problems and those of written entries; not ones about the services as
    # a whole or an implied entry, which a left-out entry may have caused; with a part of
    # the job cut out, only what each entry's own rules say
    out = ProblemList(
        p
        for p in found
        if (p.path[:1] != ("services",) and not outside)
        or (len(p.path) > 1 and p.path[0] == "services" and isinstance(p.path[1], int))
    )
    out.count_more(found.more_errors)
    return out


def _in_entry(problem: Problem) -> bool:
    """Whether ``problem`` lies inside one service entry."""
    path = problem.path
    return len(path) >= 2 and path[0] == "services" and isinstance(path[1], int)


def _cut(data: dict[str, Any], paths: list[tuple[Any, ...]]) -> dict[str, Any] | None:
    """``data`` without the values at ``paths`` (each an optional setting with a default),
    or ``None`` when a path is a whole section or a whole role, whose absence would change
    what the rest of the recipe means."""
    import copy

    out = copy.deepcopy(data)
    for path in paths:
        if len(path) < 2 or (path[0] == "roles" and len(path) < 3):
            return None
        parent: Any = out
        for part in path[:-1]:
            try:
                parent = parent[part]
            except (KeyError, IndexError, TypeError):
                return None
        if isinstance(parent, dict) and path[-1] in parent:
            del parent[path[-1]]
        elif isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
            return None  # an item of a list (an argv word): the rest would be read shifted
        else:
            return None  # nothing there to cut (a required key is missing): no guessing
    return out


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
        hint = formats.foreign_hint(data)
        message = (
            f"this recipe has no `schema: 2`{hint}"
            if hint
            else "this recipe has no `schema: 2`: it is the v1 layout. Run `srt migrate"
            f" {doc.source}` to rewrite it, then check the result"
        )
        raise _fail(doc, [Problem((), message)])
    if data.get("schema") != 2:
        raise _fail(
            doc, [Problem(("schema",), f"only schema 2 is supported, got {data.get('schema')!r}")]
        )
    try:
        recipe = validation.validate(Recipe, data)
    except ValidationError as exc:
        shape = shape_problems(exc, Recipe, data)
        shape.extend(_checks_beside(data, shape, plugins))
        raise _fail(doc, shape) from None
    result = check(recipe, plugins)
    located = locate(result.problems, doc.source, data, doc.mark_of)
    errors = [p for p in located if not p.warning]
    if errors:
        raise RecipeError(doc.source, located)
    # what the rules above do not look at (argv words, a preamble, a path) may not carry a
    # NUL either: execve would refuse it at launch time
    nul = bounds.nul_path(doc.text, data)
    if nul is not None:
        raise _fail(doc, [Problem(nul, "must not contain a NUL character")])
    return LoadedRecipe(
        recipe=recipe,
        services=result.services,
        document=doc,
        warnings=[p for p in located if p.warning],
        job_probes=result.job_probes,
        engine=result.engine,
        benchmark=result.benchmark,
    )
