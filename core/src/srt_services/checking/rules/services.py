"""Rules of the service list as a whole: unique names, and the services plugins imply.

A plugin may imply services (the etcd a dynamo frontend needs); they are validated like
written entries and merged with them (see :mod:`srt_services.checking.effective`) before
each entry's own rules run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from srt_services.checking.effective import EffectiveService, merge
from srt_services.errors import PluginError
from srt_services.recipe import validation
from srt_services.recipe.models import ServiceSpec
from srt_services.recipe.pydantic_errors import shape_problems

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.checking.rules.service import ServiceRules
    from srt_services.checking.settled import Settled
    from srt_services.contracts.implied import ImpliedService


def settle_services(ctx: RuleContext, rules: ServiceRules) -> list[Settled]:
    """Every service the job runs, written and implied, settled by ``rules``."""
    _unique_names(ctx)
    effective = merge(ctx.recipe.services, _implied(ctx))
    if ctx.origin is not None:
        effective = _at_origin(effective, ctx.origin)
    settled: list[Settled] = []
    for eff in effective:
        s = rules.settle(eff)
        if s is not None:
            settled.append(s)
    return settled


def _unique_names(ctx: RuleContext) -> None:
    origin = ctx.origin
    seen: dict[str, int] = {}
    for i, spec in enumerate(ctx.recipe.services):
        at = origin[i] if origin is not None else i
        if spec.name in seen:
            ctx.add(
                ("services", at, "name"),
                f"duplicate service name {spec.name!r} (also services[{seen[spec.name]}])",
            )
        else:
            seen[spec.name] = at


def _implied(ctx: RuleContext) -> list[tuple[ImpliedService, ServiceSpec]]:
    """(implied service, its validated entry) of every service a plugin implies."""
    try:
        items = ctx.plugins.implied_services(ctx.recipe)
    except PluginError as exc:
        ctx.add(("services",), str(exc))
        return []
    out = []
    for item in items:
        try:
            spec = validation.validate(ServiceSpec, item.entry)
        except ValidationError as exc:
            # pluggy's call does not say which implementation returned what; the reason
            # the plugin wrote tells the user where it came from
            detail = "; ".join(p.message for p in shape_problems(exc, ServiceSpec, item.entry))
            ctx.add(
                ("services",),
                f"an implied service {item.entry.get('name')!r} (implied by: {item.reason})"
                f" is invalid: {detail}",
            )
            continue
        out.append((item, spec))
    return out


def _at_origin(effective: list[EffectiveService], origin: list[int]) -> list[EffectiveService]:
    """Only the written entries, at their place in the document: an implied service may
    differ once the left-out entries (which can override it) are fixed."""
    kept = [e for e in effective if e.path is not None]
    for e in kept:
        _, index = cast("tuple[str, int]", e.path)
        e.path = ("services", origin[index])
    return kept
