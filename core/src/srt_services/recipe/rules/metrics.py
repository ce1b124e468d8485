"""Rules of a service's ``metrics`` endpoints beyond their shape.

``metrics.path`` is rendered for each scraped node like the recipe's other strings (the
scrape target of a node uses the values of the service's first instance there), so a
``{name}`` srt does not know is refused at load time instead of reaching Prometheus as
a literal path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.recipe import placeholders as ph
from srt_services.recipe.rules import strings

if TYPE_CHECKING:
    from srt_services.recipe.models import ServiceSpec
    from srt_services.recipe.problems import Path
    from srt_services.recipe.rules.context import RuleContext


def metrics_path_placeholders(ctx: RuleContext, at: Path, spec: ServiceSpec) -> None:
    """Every unknown placeholder of each written ``metrics[i].path``, as a problem."""
    for i, m in enumerate(spec.metrics):
        if "{" in m.path:
            strings.text(ctx, (*at, "metrics", i, "path"), m.path, ph.COMMON)
