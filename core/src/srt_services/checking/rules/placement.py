"""Rules of where a service runs: its placement (a node set), pool and expansion (``per``).

A service either rides on a pool (``placement.pool``), owns one (``nodes``), or is placed
on a node set that a placement plugin selects; ``per`` then expands it over those nodes or
over the engine workers on them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.contracts.kind import ServiceKind
    from srt_services.recipe.models import ServiceSpec
    from srt_services.recipe.problems import Path

#: (placement, pool, per) of a service
Where = tuple[str, str | None, str]


class PlacementRules:
    """Settles (placement, pool, per) of each service, after checking the combination.

    The answer depends only on the written node/per, whether a pool or ``nodes`` is given,
    and the kind; a combination that passed is remembered, so the thousands of services of
    a generated recipe that share one pay a dictionary lookup.
    """

    __slots__ = ("_placed", "ctx")

    def __init__(self, ctx: RuleContext) -> None:
        self.ctx = ctx
        self._placed: dict[tuple[str, str | None, str | None, bool, bool], tuple[str, str]] = {}

    def settle(self, at: Path, spec: ServiceSpec, kind: ServiceKind) -> Where:
        p = spec.placement
        key = (
            kind.name,
            p.node if p is not None else None,
            p.per if p is not None else None,
            p is not None and p.pool is not None,
            spec.nodes is not None,
        )
        found = self._placed.get(key)
        if found is not None:
            placement, per = found
            if placement == "pool" and p is not None:
                return placement, p.pool, per
            return placement, spec.name if spec.nodes is not None else None, per
        before = len(self.ctx.problems)
        result = self._check(at, spec, kind)
        if len(self.ctx.problems) == before:
            self._placed[key] = (result[0], result[2])
        return result

    def _check(self, at: Path, spec: ServiceSpec, kind: ServiceKind) -> Where:
        p = spec.placement
        per = p.per if p is not None and p.per is not None else kind.default_per
        placement, pool = self._node_set(at, spec, kind)
        if p is not None and p.node is not None:
            node_path: Path = (*at, "placement", "node")
        elif spec.nodes is not None:
            node_path = (*at, "nodes")
        else:
            node_path = (*at, "type")
        self._placement_known(node_path, placement, kind)
        per_path = (
            (*at, "placement", "per") if p is not None and p.per is not None else (*at, "type")
        )
        self._expansion(per_path, per, placement, spec)
        return placement, pool, per

    def _node_set(self, at: Path, spec: ServiceSpec, kind: ServiceKind) -> tuple[str, str | None]:
        """(placement, pool): a pool it rides on, the pool it owns, or a placement's nodes."""
        p = spec.placement
        if p is not None and p.pool is not None:
            if spec.nodes is not None:
                self.ctx.add(
                    (*at, "placement", "pool"),
                    "a service with nodes owns its own pool; drop placement.pool",
                )
            return "pool", p.pool
        if spec.nodes is not None:
            placement = p.node if p is not None and p.node is not None else "workers"
            if placement != "workers":
                self.ctx.add(
                    (*at, "placement", "node"),
                    f"a service with nodes runs on the pool it owns, so placement.node must be"
                    f" workers (or omitted); got {placement!r}",
                )
            return placement, spec.name
        return (p.node if p is not None and p.node is not None else kind.default_placement), None

    def _placement_known(self, node_path: Path, placement: str, kind: ServiceKind) -> None:
        """The placement exists, and the kind may be placed there."""
        plugins = self.ctx.plugins
        if placement != "pool" and not plugins.has("placement", placement):
            known = ", ".join(n for n in sorted(plugins.placements()) if n != "pool")
            self.ctx.add(node_path, f"must be one of {known}; got {placement!r}")
        elif kind.allowed_placements is not None and placement not in kind.allowed_placements:
            allowed = ", ".join(sorted(kind.allowed_placements))
            self.ctx.add(
                node_path, f"type {kind.name!r} must be placed on {allowed}; got {placement!r}"
            )
        if placement == "dedicated" and not kind.supports_dedicated:
            self.ctx.add(
                node_path,
                f"dedicated is only for the infra kinds that support it, not type {kind.name!r}",
            )

    def _expansion(self, per_path: Path, per: str, placement: str, spec: ServiceSpec) -> None:
        """The expansion exists; one that attaches to workers needs a placement with some."""
        plugins = self.ctx.plugins
        if not plugins.has("expansion", per):
            known = ", ".join(sorted(plugins.expansions()))
            self.ctx.add(per_path, f"must be one of {known}; got {per!r}")
            return
        if not plugins.expansion(per).needs_workers:
            return
        if spec.nodes is not None or placement == "pool":
            self.ctx.add(per_path, f"per: {per} attaches to engine workers, not to a pool")
        elif (
            plugins.has("placement", placement)
            and plugins.placement(placement).worker_roles is None
        ):
            self.ctx.add(
                per_path,
                f"per: {per} needs a placement that selects workers (prefill, decode,"
                f" agg or workers); got {placement!r}",
            )
