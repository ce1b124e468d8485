"""Recipes of other tools: which format a document is, its variants, and each variant as
the schema-2 document the rest of srt checks and plans.

A document that says ``schema`` is srt's own. One that says ``format: <name>`` goes to that
format alone; otherwise each installed format is asked whether it recognises the document's
shape. A sweep file is several jobs: the format lists its variants, a selector (the other
tool's syntax) picks some, and without one the format's default set is taken. Problems of
the original are located in the original; problems of a translation are located at the
original line each translated value came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from srt_services.contracts.formats import FormatProblems
from srt_services.recipe.problems import Problem, RecipeError, locate
from srt_services.recipe.source import Document, TranslatedDocument

if TYPE_CHECKING:
    from srt_services.contracts.formats import RecipeFormat, Variant
    from srt_services.plugins.manager import PluginSet

#: Keys that mark a document as another tool's recipe when no format plugin claims it (an
#: srtctl recipe has ``model`` and ``backend``), for the hint about what to install.
FOREIGN_HINTS: dict[str, tuple[str, ...]] = {"srtctl": ("model", "backend", "benchmark")}
#: Which plugin reads which format, for that hint.
FIRST_PARTY_FORMATS: dict[str, str] = {"srtctl": "srt-srtctl"}


@dataclass(frozen=True, slots=True)
class VariantDocument:
    """One job of a recipe file, ready to be checked: its schema-2 document."""

    document: Document
    format: str | None = None
    variant: Variant | None = None
    #: what srt does differently from the original tool for this recipe
    notes: tuple[str, ...] = ()
    resolved: dict[str, Any] | None = None


def fail(doc: Document, problems: list[Problem]) -> RecipeError:
    return RecipeError(doc.source, locate(problems, doc.source, doc.data, doc.mark_of))


def format_of(doc: Document, plugins: PluginSet) -> RecipeFormat | None:
    """The format that reads ``doc``; ``None`` for srt's own (or an unclaimed) document."""
    data = doc.data
    if not isinstance(data, dict) or "schema" in data:
        return None
    declared = data.get("format")
    if declared is not None:
        if not isinstance(declared, str) or not plugins.has("format", declared):
            known = sorted(plugins.recipe_formats())
            hint = ""
            if isinstance(declared, str) and declared in FIRST_PARTY_FORMATS:
                dist = FIRST_PARTY_FORMATS[declared]
                hint = f"; it is read by {dist}, which is not installed (pip install {dist})"
            raise fail(
                doc,
                [
                    Problem(
                        ("format",),
                        f"{declared!r} is not a known recipe format"
                        f" (known: {', '.join(known) or 'none installed'}){hint}",
                    )
                ],
            )
        return plugins.recipe_format(declared)
    for fmt in plugins.recipe_formats().values():
        if fmt.recognises(data):
            return fmt
    return None


def foreign_hint(data: dict[str, Any]) -> str:
    """Why a document without ``schema`` may be another tool's recipe, and what reads it."""
    for name, keys in FOREIGN_HINTS.items():
        if all(k in data for k in keys[:2]):
            dist = FIRST_PARTY_FORMATS[name]
            return (
                f"; it looks like an {name} recipe: install {dist} (pip install {dist}) to run"
                f" it as it is, or say `format: {name}`"
            )
    return ""


def variant_documents(
    doc: Document,
    fmt: RecipeFormat,
    selector: str | None,
    settings: Mapping[str, Any] | None = None,
) -> list[VariantDocument]:
    """The variants of ``doc`` that ``selector`` names (the format's default set without
    one), each translated; the original's problems raise located in the original."""
    data = {k: v for k, v in doc.data.items() if k != "format"}
    try:
        variants = fmt.variants(data, doc.source, settings or {})
        chosen = fmt.select(variants, selector) if selector else fmt.default_variants(variants)
    except FormatProblems as exc:
        raise fail(doc, exc.problems) from None
    if not chosen:
        shown = ", ".join(v.selector for v in variants)
        where = f"--variant {selector}" if selector else "the default selection"
        raise RecipeError(
            doc.source,
            locate(
                [Problem((), f"{where} names none of this recipe's variants ({shown})")],
                doc.source,
                doc.data,
                doc.mark_of,
            ),
        )
    out = []
    for variant in chosen:
        try:
            translated = fmt.translate(data, variant, doc.source, settings or {})
        except FormatProblems as exc:
            raise fail(doc, exc.problems) from None
        translation = TranslatedDocument(
            source=doc.source,
            data=translated.data,
            text=doc.text,
            original=doc,
            origin=translated.origin,
        )
        out.append(
            VariantDocument(
                translation,
                fmt.name,
                variant,
                tuple(translated.notes),
                translated.resolved or None,
            )
        )
    return out


def all_variants(
    doc: Document, fmt: RecipeFormat, settings: Mapping[str, Any] | None = None
) -> list[Variant]:
    """Every variant of ``doc`` (for listing them), the original's problems located."""
    data = {k: v for k, v in doc.data.items() if k != "format"}
    try:
        return fmt.variants(data, doc.source, settings or {})
    except FormatProblems as exc:
        raise fail(doc, exc.problems) from None
