"""The rules of ``uses``: what a unit (a service, a role's workers, the frontend, the
benchmark) declares it uses of another service while it runs.

A ``uses`` entry names a service that runs in this job, of a kind that accepts uses (its
kind says what a capability or pool is, and refuses what it can know is wrong before
anything starts: :meth:`~srt_services.contracts.kind.ServiceKind.validate_use`). That
service must be up before the user starts, because the admission is asked of it then: a
service of a later phase, or of the same phase that is not ready first, would make every
admission fail at start-up, so it is refused here instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import get_close_matches
from typing import TYPE_CHECKING

from srt_services.recipe.models import PHASES
from srt_services.recipe.problems import Path

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.checking.settled import Settled
    from srt_services.recipe.models import UseSpec

#: The phase each of the job's own processes starts in, after every service phase before it.
_JOB_PHASE = {"roles": "workers", "frontend": "frontend", "benchmark": "benchmark"}
#: Service phases that are ready before each job phase starts.
_READY_BEFORE = {
    "workers": ("infra", "before_workers"),
    "frontend": ("infra", "before_workers"),
    "benchmark": PHASES,
}


def check_uses(ctx: RuleContext, settled: Sequence[Settled]) -> None:
    """Every problem of every ``uses`` entry of the recipe."""
    by_name = {s.name: s for s in settled}
    recipe = ctx.recipe
    for s in settled:
        for i, use in enumerate(s.spec.uses):
            _check(ctx, (*s.eff.label_path, "uses", i), use, by_name, user=s, settled=settled)
    for role, spec in recipe.roles.items():
        for i, use in enumerate(spec.uses):
            _check(ctx, ("roles", role, "uses", i), use, by_name, phase="workers")
    if recipe.frontend is not None:
        for i, use in enumerate(recipe.frontend.uses):
            _check(ctx, ("frontend", "uses", i), use, by_name, phase="frontend")
    for i, use in enumerate(recipe.benchmark.uses):
        _check(ctx, ("benchmark", "uses", i), use, by_name, phase="benchmark")


def _check(
    ctx: RuleContext,
    at: Path,
    use: UseSpec,
    by_name: dict[str, Settled],
    *,
    user: Settled | None = None,
    settled: Sequence[Settled] = (),
    phase: str | None = None,
) -> None:
    provider = by_name.get(use.service)
    if provider is None:
        close = get_close_matches(use.service, list(by_name), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        names = ", ".join(sorted(by_name)) or "none"
        ctx.add(
            (*at, "service"),
            f"no service {use.service!r} runs in this job{hint}; services: {names}",
        )
        return
    if user is not None and provider.name == user.name:
        ctx.add((*at, "service"), "a service cannot use itself")
        return
    if not provider.kind.accepts_uses:
        ctx.add(
            (*at, "service"),
            f"services[{provider.name}] is a {provider.kind.name!r} service, whose kind takes"
            " no uses (srt-oarbank's `oarbank` kind does)",
        )
        return
    if provider.spec.external is not None:
        ctx.add(
            (*at, "service"),
            f"services[{provider.name}] is external: nothing of this job runs there to admit"
            " the unit",
        )
        return
    order = _order_problem(provider, user, settled, phase)
    if order is not None:
        ctx.add((*at, "service"), order)
    for problem in provider.kind.validate_use(provider.spec, provider.options, use, ctx.recipe):
        ctx.add((*at, *problem.path), problem.message, problem.warning)


def _order_problem(
    provider: Settled, user: Settled | None, settled: Sequence[Settled], phase: str | None
) -> str | None:
    """Why ``provider`` may not be ready when the user starts, or ``None``."""
    if user is None:
        if phase is not None and provider.start not in _READY_BEFORE[phase]:
            return (
                f"services[{provider.name}] starts in {provider.start}, after the {phase}"
                " start; start it earlier (start: before_workers)"
            )
        return None
    mine, theirs = PHASES.index(user.start), PHASES.index(provider.start)
    if theirs < mine:
        return None
    if theirs > mine:
        return (
            f"services[{provider.name}] starts in {provider.start}, after this service's"
            f" phase ({user.start}); start it earlier"
        )
    if user.spec.after is not None:
        if provider.name in user.spec.after:
            return None
    elif provider.spec.after is None:
        chain = [s.name for s in settled if s.start == user.start and s.spec.after is None]
        if chain.index(provider.name) < chain.index(user.name):
            return None
    return (
        f"services[{provider.name}] may not be ready when this service starts; add"
        f" {provider.name!r} to its `after`"
    )
