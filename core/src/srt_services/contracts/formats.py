"""The recipe-format interface: a recipe written for another tool, read as it is.

srt's own recipes say ``schema: 2``. A document without it may be a recipe of another tool
(NVIDIA srtctl's, the tool whose services block srt implements): a format plugin
recognises it by its shape, expands it into its variants (a sweep file is several jobs)
and translates each into the schema-2 document srt plans, saying for every part of the
translation where it came from in the original. So every problem is reported at the line
the user wrote, ``srt migrate --from <format>`` can write the translation down, and the
rest of srt (checks, planner, runtime) knows only schema 2.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from srt_services.recipe.problems import Path, Problem

#: A schema-2 path -> the path of the original document it was translated from.
Origin = Callable[["Path"], "Path"]


@dataclass(frozen=True, slots=True)
class Variant:
    """One job of a recipe file: a plain recipe has one, a sweep one per combination."""

    #: how a user selects it (``base``, ``override_fast``, ``zip_override_tp[1]``)
    selector: str
    #: the job's name
    name: str


@dataclass(slots=True)
class Translated:
    """One variant as a schema-2 document, and where each of its parts came from."""

    data: dict[str, Any]
    origin: Origin
    #: what srt does differently from the original tool for this recipe, for the user
    notes: list[str] = field(default_factory=list)
    #: the original document with this variant's choices applied (what the other tool
    #: would have run), for ``srt migrate`` and the job directory's record
    resolved: dict[str, Any] = field(default_factory=dict)


class FormatProblems(Exception):
    """What is wrong with the original document, each problem at a path of it."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class RecipeFormat:
    """Base class of recipe formats. Subclass it and set ``name``; registered through
    ``srt_register_recipe_formats``."""

    #: How a recipe declares it (``format: srtctl``) and ``srt migrate --from`` names it.
    name: ClassVar[str]
    summary: ClassVar[str] = ""

    def recognises(self, data: Mapping[str, Any]) -> bool:
        """Whether a document without ``schema`` is one of this format (by its shape)."""
        return False

    def variants(
        self, data: Mapping[str, Any], source: str, settings: Mapping[str, Any]
    ) -> list[Variant]:
        """The jobs of the document at ``source`` (a path, or ``<stdin>``), in order;
        :class:`FormatProblems` when it cannot be expanded. ``settings`` is the site's
        ``[formats.<name>]`` table (empty when the site has none)."""
        raise NotImplementedError

    def default_variants(self, variants: list[Variant]) -> list[Variant]:
        """The variants run when none is selected (the original tool's default)."""
        return variants

    def select(self, variants: list[Variant], selector: str) -> list[Variant]:
        """The variants a user's selector names (the original tool's selector syntax);
        empty when it names none."""
        return [v for v in variants if v.selector == selector]

    def translate(
        self,
        data: Mapping[str, Any],
        variant: Variant,
        source: str,
        settings: Mapping[str, Any],
    ) -> Translated:
        """``variant`` of the document as a schema-2 document; :class:`FormatProblems`
        (paths of the original) when it is not a valid recipe of this format."""
        raise NotImplementedError
