"""``check``: the plugin-aware rules of a recipe whose shape the models accepted.

The rules live in :mod:`srt_services.checking.rules`, one module per family; this runs them
in order and hands back what they found and what they settled: each service's effective
values (:class:`~srt_services.checking.settled.Settled`) and the bound probes of the job's
own processes, so the planner never re-derives either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.checking.rules.context import RuleContext
from srt_services.checking.rules.cross import check_cross
from srt_services.checking.rules.engines import (
    SettledBenchmark,
    SettledEngine,
    settle_benchmark,
    settle_engine,
)
from srt_services.checking.rules.envnames import check_env_names
from srt_services.checking.rules.implied_kinds import check_implied_kinds
from srt_services.checking.rules.job import check_job
from srt_services.checking.rules.placement import PlacementRules
from srt_services.checking.rules.probes import ProbeRules
from srt_services.checking.rules.service import ServiceRules
from srt_services.checking.rules.services import settle_services
from srt_services.checking.settled import JobProbes, Settled
from srt_services.recipe.problems import ProblemList

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.models import Recipe


@dataclass(slots=True)
class CheckResult:
    services: list[Settled] = field(default_factory=list)
    problems: ProblemList = field(default_factory=ProblemList)
    job_probes: JobProbes = field(default_factory=JobProbes)
    #: the engine that builds the job's workers and frontend (``None``: no plugin builds them)
    engine: SettledEngine | None = None
    #: the benchmark plugin behind ``benchmark.type`` (``None``: core's own type)
    benchmark: SettledBenchmark | None = None


def check(recipe: Recipe, plugins: PluginSet, origin: list[int] | None = None) -> CheckResult:
    """Every plugin-aware rule of a recipe whose shape is valid.

    With ``origin``, ``recipe`` holds only the service entries whose shape passed, and
    ``origin[i]`` is where its entry ``i`` sits in the document: the rules of each entry
    then run, so that their problems are reported together with the shape errors of the
    others. Rules that need every entry (cross-service ones, a kind's ``validate``) wait
    for the full check, where a left-out entry could not make them report a false problem.
    """
    ctx = RuleContext(recipe, plugins, origin)
    probes = ProbeRules(ctx)
    job_probes = check_job(ctx, probes)
    engine = settle_engine(ctx)
    benchmark = settle_benchmark(ctx)
    if origin is None:  # a left-out entry may be the one that switches a service off
        check_implied_kinds(ctx)
    services = settle_services(ctx, ServiceRules(ctx, probes, PlacementRules(ctx)))
    check_env_names(ctx, services)
    if origin is None:  # cross-service rules need every entry
        check_cross(ctx, services)
    return CheckResult(
        services=services,
        problems=ctx.problems,
        job_probes=job_probes,
        engine=engine,
        benchmark=benchmark,
    )
