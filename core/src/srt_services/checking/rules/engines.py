"""Rules of what plugins build for the job itself: the engine behind ``frontend.type`` (the
workers and the frontend without a ``command``) and the benchmark behind
``benchmark.type``.

A frontend type that names no installed engine is still fine when every process it would
build has a hand-written command (a recipe written before srt had engine plugins, or one
that runs its own build): only what would have to be built needs the plugin, and the
message then says which plugin that is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from srt_services.recipe import validation
from srt_services.recipe.problems import Problem
from srt_services.recipe.pydantic_errors import shape_problems

if TYPE_CHECKING:
    from pydantic import BaseModel

    from srt_services.checking.rules.context import RuleContext
    from srt_services.contracts.benchmark import BenchmarkKind
    from srt_services.contracts.engine import Engine
    from srt_services.recipe.problems import Path

#: Frontend types srt knows without a plugin: recipes may run them with their own commands.
KNOWN_FRONTENDS: tuple[str, ...] = ("dynamo", "sglang", "vllm", "trtllm-serve", "none")
#: Benchmark types core runs itself.
CORE_BENCHMARKS: tuple[str, ...] = ("manual", "command")
#: Which first-party plugin provides an engine or a benchmark, for the install hint.
FIRST_PARTY_ENGINES: dict[str, str] = {
    "dynamo": "srt-dynamo",
    "sglang": "srt-direct",
    "vllm": "srt-direct",
    "trtllm-serve": "srt-direct",
}
FIRST_PARTY_BENCHMARKS: dict[str, str] = dict.fromkeys(
    ("sa-bench", "gsm8k", "gpqa", "mooncake-router", "trace-replay", "mmlu", "longbenchv2"),
    "srt-benchmarks",
)


@dataclass(frozen=True, slots=True)
class SettledEngine:
    """The engine a recipe's frontend type names, with its checked ``engine.options``."""

    engine: Engine
    options: Any


@dataclass(frozen=True, slots=True)
class SettledBenchmark:
    kind: BenchmarkKind
    options: Any


def settle_engine(ctx: RuleContext) -> SettledEngine | None:
    """The engine of ``frontend.type`` when one is installed (``None`` otherwise), and the
    problems of everything that needs one."""
    recipe = ctx.recipe
    ftype = recipe.frontend_type
    registered = ftype != "none" and ctx.plugins.has("engine", ftype)
    if not registered and ftype not in KNOWN_FRONTENDS:
        known = sorted({*KNOWN_FRONTENDS, *ctx.plugins.names("engine")})
        ctx.add(
            ("frontend", "type"), f"{ftype!r} is not a known frontend type ({', '.join(known)})"
        )
        return None
    engine = ctx.plugins.engine(ftype) if registered else None
    needs = _built_by_engine(ctx)
    if engine is None:
        for at in needs:
            ctx.add(at, _needs_plugin(ftype))
        if recipe.engine.options:
            ctx.add(("engine", "options"), f"are read by the engine plugin: {_needs_plugin(ftype)}")
        _config_without_engine(ctx)
        return None
    options = _options(ctx, ("engine", "options"), engine.Options, recipe.engine.options, ftype)
    building_workers = any(at[0] == "roles" for at in needs)
    if building_workers and recipe.engine.type not in engine.backends:
        runs = ", ".join(sorted(engine.backends)) or "none"
        ctx.add(
            ("engine", "type"),
            f"frontend.type {ftype} builds workers for the backends {runs}, not"
            f" {recipe.engine.type!r}; give the roles a command, or pick one of those",
        )
    _config_without_engine(ctx)
    if options is not None:
        for problem in engine.validate(recipe, options):
            ctx.problems.append(problem)
    return SettledEngine(engine, options) if options is not None else None


def settle_benchmark(ctx: RuleContext) -> SettledBenchmark | None:
    """The benchmark plugin of ``benchmark.type`` (``None`` for core's own types)."""
    spec = ctx.recipe.benchmark
    if spec.type in CORE_BENCHMARKS:
        if spec.options:
            ctx.add(("benchmark", "options"), f"are for a benchmark plugin, not type {spec.type}")
        return None
    if not ctx.plugins.has("benchmark", spec.type):
        dist = FIRST_PARTY_BENCHMARKS.get(spec.type)
        known = sorted({*CORE_BENCHMARKS, *ctx.plugins.names("benchmark")})
        hint = (
            f"; it is provided by {dist}, which is not installed (pip install {dist})"
            if dist
            else ""
        )
        ctx.add(
            ("benchmark", "type"),
            f"{spec.type!r} is not a known benchmark ({', '.join(known)}){hint}",
        )
        return None
    kind = ctx.plugins.benchmark(spec.type)
    if spec.command is not None:
        ctx.add(
            ("benchmark", "command"),
            f"has no effect: benchmark.type {spec.type} builds its own command (use"
            " type: command to run this one)",
        )
    options = _options(ctx, ("benchmark", "options"), kind.Options, spec.options, spec.type)
    if options is None:
        return None
    for problem in kind.validate(ctx.recipe, options):
        ctx.problems.append(problem)
    return SettledBenchmark(kind, options)


def _built_by_engine(ctx: RuleContext) -> list[Path]:
    """Where the recipe leaves a process for the engine to build: each role without a
    ``command``, and the frontend without one."""
    recipe = ctx.recipe
    out: list[Path] = [
        ("roles", role, "command") for role, spec in recipe.roles.items() if spec.command is None
    ]
    front = recipe.frontend
    if front is not None and front.type != "none" and front.command is None:
        out.append(("frontend", "command"))
    return out


def _needs_plugin(ftype: str) -> str:
    if ftype == "none":
        return "is required (frontend.type none has no engine to build it)"
    dist = FIRST_PARTY_ENGINES.get(ftype)
    where = f"{dist}, which is not installed (pip install {dist})" if dist else "its engine plugin"
    return f"is required unless frontend.type {ftype}'s engine builds it: that needs {where}"


def _config_without_engine(ctx: RuleContext) -> None:
    """A role's ``config`` is the engine's to turn into flags: with a hand-written command
    it would do nothing, silently."""
    for role, spec in ctx.recipe.roles.items():
        if spec.config and spec.command is not None:
            ctx.add(
                ("roles", role, "config"),
                "has no effect with a hand-written command (the engine plugin turns config"
                " into the flags of the command it builds); put the flags in command or args",
            )


def _options(
    ctx: RuleContext, at: Path, model: type[BaseModel], written: dict[str, Any], owner: str
) -> Any:
    """``written`` validated by a plugin's options model, or ``None`` after reporting why
    not (each problem at its key, an unknown key naming the plugin)."""
    try:
        return validation.validate(model, written)
    except ValidationError as exc:
        found = shape_problems(exc, model, written, at)
        ctx.problems.count_more(found.more_errors)
        for p in found:
            msg = p.message
            if msg.startswith("unknown key"):
                msg = f"{owner} does not understand this setting" + msg[len("unknown key") :]
            ctx.problems.append(Problem(p.path, msg))
        return None
