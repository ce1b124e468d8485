"""srt-mooncake's hook implementations.

Kept tiny and import-light: srt imports this module only when a recipe needs one of the
Mooncake kinds or the recipe check, and the kind modules (pydantic and all) only when a
hook is called. There is no implied-services hook: a Mooncake master is always declared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import Problem, Recipe, ServiceKind


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from srt_mooncake.master import MooncakeMasterKind
    from srt_mooncake.store import MooncakeStoreKind

    return [MooncakeMasterKind, MooncakeStoreKind]


@hookimpl
def srt_validate_recipe(recipe: Recipe) -> list[Problem]:
    from srt_mooncake.rules import recipe_problems

    return recipe_problems(recipe)
