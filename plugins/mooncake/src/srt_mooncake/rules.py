"""Rules across a recipe's entries that only the Mooncake kinds know."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import one_per_job_problems

from srt_mooncake import env

if TYPE_CHECKING:
    from srt_services.extend import Problem, Recipe


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """A job has one master: MOONCAKE_MASTER names one, and every store registers with it."""
    return one_per_job_problems(
        recipe, env.MASTER_KIND, "Mooncake master (MOONCAKE_MASTER names one)"
    )
