"""Rules of ``metrics`` annotations: on services, the roles' workers and the frontend.

An endpoint's ``path`` is rendered per instance, so a placeholder srt does not know would
reach Prometheus verbatim and every scrape would 404: it is refused here, with its line.
An annotation while ``observability.metrics`` is false is kept but nothing scrapes it,
which is worth a warning (the user probably expected it to be scraped).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.checking.rules import strings

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.recipe.models import MetricsSpec
    from srt_services.recipe.problems import Path


def endpoints(
    ctx: RuleContext, at: Path, metrics: list[MetricsSpec], allowed: frozenset[str]
) -> None:
    """One entry's ``metrics``: distinct names when there are several, known placeholders
    in each path, and the warning when metrics are off."""
    if not metrics:
        return
    if len(metrics) > 1:
        names = [m.name for m in metrics]
        if None in names or len(set(names)) != len(names):
            ctx.add(
                (*at, "metrics"),
                f"declares {len(names)} endpoints; give each a distinct name",
            )
    for i, m in enumerate(metrics):
        if "{" in m.path:
            strings.text(ctx, (*at, "metrics", i, "path"), m.path, allowed)
    if not ctx.recipe.observability.metrics:
        ctx.add(
            (*at, "metrics"),
            "is not scraped: observability.metrics is false (set it to true, or drop this)",
            warning=True,
        )
