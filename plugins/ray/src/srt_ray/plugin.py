"""srt-ray's hook implementations.

Kept tiny and import-light: srt imports this module only when a recipe needs ``type: ray``,
the ``ray-fleet`` probe or the recipe hook, and the kind and probe modules (pydantic and
all) only when a hook is called. Ray itself is never imported by srt: it runs in the job.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import Probe, Problem, Recipe, ServiceKind


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from srt_ray.kind import RayKind

    return [RayKind]


@hookimpl
def srt_register_probes() -> list[type[Probe]]:
    from srt_ray.fleet import RayFleetProbe

    return [RayFleetProbe]


@hookimpl
def srt_validate_recipe(recipe: Recipe) -> list[Problem]:
    from srt_ray.kind import recipe_problems

    return recipe_problems(recipe)
