"""srt-lmcache's hook implementations.

Kept tiny and import-light: srt imports this module only when a recipe needs
``type: lmcache-server`` or one of the hooks, and the kind module (pydantic and all) only
when a hook is called. LMCache itself is never imported by srt: it runs in the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import ImpliedService, Problem, Recipe, ServiceKind


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from srt_lmcache.kind import LMCacheServerKind

    return [LMCacheServerKind]


@hookimpl
def srt_implied_services(recipe: Recipe) -> list[ImpliedService]:
    from srt_lmcache.kind import implied

    return implied(recipe)


@hookimpl
def srt_validate_recipe(recipe: Recipe) -> list[Problem]:
    from srt_lmcache.kind import recipe_problems

    return recipe_problems(recipe)
