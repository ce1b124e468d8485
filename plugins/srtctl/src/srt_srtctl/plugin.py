"""srt-srtctl's hook implementations: the ``srtctl`` recipe format (loaded on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import RecipeFormat


@hookimpl
def srt_register_recipe_formats() -> list[type[RecipeFormat]]:
    from srt_srtctl.recipe_format import SrtctlFormat

    return [SrtctlFormat]
