"""Rules across a recipe's entries that only the Mooncake kinds know."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import Problem

from srt_mooncake import env

if TYPE_CHECKING:
    from srt_services.extend import Recipe


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """A job has one master: MOONCAKE_MASTER names one, and every store registers with it."""
    masters = [(i, s) for i, s in enumerate(recipe.services) if s.type == env.MASTER_KIND]
    enabled = [(i, s) for i, s in masters if s.enabled]
    out: list[Problem] = []
    if len(enabled) > 1:
        first = enabled[0][1].name
        for i, _spec in enabled[1:]:
            out.append(
                Problem(
                    ("services", i, "type"),
                    f"a job has one Mooncake master (MOONCAKE_MASTER names one); services[{first}]"
                    " is already one: drop this entry or set enabled: false",
                )
            )
    return out
