"""``srt migrate --from <format>``: another tool's recipe written as the equivalent schema-2
recipe, for users who want to switch (``srt run`` reads the original as it is anyway).

The translation is the format plugin's, the one ``srt run`` uses; this writes it down with
the original's comments carried to the keys they described (:mod:`srt_services.recipe.
comments`) and a header that says where it came from. A sweep file gives one recipe per
selected variant. Each result is loaded again before it is handed back, so what ``migrate``
writes is a recipe srt accepts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.app import compose
from srt_services.errors import SrtError

if TYPE_CHECKING:
    from srt_services.app.compose import Setup


@dataclass(frozen=True, slots=True)
class TranslateRequest:
    recipe: str
    #: the format the recipe is written in (``srtctl``)
    source_format: str
    #: the variants of a sweep file to write (default: the tool's default set)
    variant: str | None = None


@dataclass(frozen=True, slots=True)
class Translation:
    #: the job's name (a variant's name for a sweep file)
    name: str
    selector: str | None
    text: str
    #: what srt does differently from the original tool for this recipe
    notes: list[str] = field(default_factory=list)


def translate(where: Setup, request: TranslateRequest) -> list[Translation]:
    """The schema-2 text of each selected job of the recipe, each checked by loading it."""
    from srt_services.checking import formats
    from srt_services.recipe.comments import commented_yaml
    from srt_services.recipe.reading import read_text, source_name
    from srt_services.recipe.source import parse_text

    plugins = where.plugins
    fmt = plugins.recipe_format(request.source_format)
    text = read_text(request.recipe)
    doc = parse_text(text, source_name(request.recipe))
    if isinstance(doc.data, dict) and "schema" in doc.data:
        raise SrtError(f"{doc.source} is a schema-2 recipe already: nothing to translate")
    out = []
    for found in formats.variant_documents(
        doc, fmt, request.variant, where.site.formats.get(fmt.name, {})
    ):
        data = found.document.data
        origin = found.document.origin  # type: ignore[attr-defined]
        variant = found.variant
        header = f"Translated by `srt migrate --from {fmt.name}` from {doc.source}" + (
            f" ({variant.selector})" if variant is not None else ""
        )
        written = commented_yaml(text, data, origin, header)
        compose.load(where, doc.source, text=written)  # what is written must load
        out.append(
            Translation(
                name=str(data.get("name", "")),
                selector=variant.selector if variant is not None else None,
                text=written,
                notes=list(found.notes),
            )
        )
    return out
