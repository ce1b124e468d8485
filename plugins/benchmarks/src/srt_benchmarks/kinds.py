"""The benchmark kinds: what each builds as the job's client process.

Each runs ``{python} -m srt_benchmarks <type> --key value...`` on the client node: the
interpreter srt runs under (``{python}``), so the runner needs nothing installed but this
distribution next to srt. In a container (the benchmark's own or the job's) the host's
interpreter path means nothing, so it is ``python3`` there, and the image must hold
srt-benchmarks. The frontend's address (``SRT_FRONTEND_URL``) and the result file
(``SRT_BENCHMARK_RESULT``) come from the environment srt gives every benchmark.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from srt_services.extend import BenchmarkKind, EngineProcess, Problem

from srt_benchmarks.flags import to_argv
from srt_benchmarks.options import (
    GpqaOptions,
    Gsm8kOptions,
    MooncakeRouterOptions,
    SaBenchOptions,
    TraceReplayOptions,
)

if TYPE_CHECKING:
    from pydantic import BaseModel
    from srt_services.extend import InstanceContext, Recipe

#: the runner's module (``python -m srt_benchmarks``)
MODULE = "srt_benchmarks"


def _frontend_problem(recipe: Recipe, kind: str) -> Iterable[Problem]:
    if recipe.frontend is None or recipe.frontend.type == "none":
        yield Problem(("benchmark", "type"), f"{kind} needs a frontend to send requests to")


class _Kind(BenchmarkKind):
    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        return _frontend_problem(recipe, self.name)

    def argv(self, recipe: Recipe, options: BaseModel) -> list[str]:
        # the model name when known at plan time; else the runner asks ``/v1/models``
        model = getattr(options, "model", None) or recipe.engine.served_model_name
        words = to_argv(options.model_copy(update={"model": model}))
        python = "python3" if (recipe.benchmark.container or recipe.container) else "{python}"
        return [python, "-m", MODULE, self.name, *words]

    def process(self, recipe: Recipe, options: Any, ctx: InstanceContext) -> EngineProcess:
        return EngineProcess(argv=self.argv(recipe, options), env={"PYTHONUNBUFFERED": "1"})


def _tokenizer_problem(recipe: Recipe, options: Any, kind: str) -> Iterable[Problem]:
    if not (options.tokenizer or getattr(options, "custom_tokenizer", None) or recipe.engine.model):
        yield Problem(
            ("benchmark", "options", "tokenizer"),
            f"is required when engine.model is not set: {kind} builds its prompts with"
            " the model's tokenizer",
        )


class _Prompted(_Kind):
    """A benchmark that builds its prompts with the served model's tokenizer."""

    def argv(self, recipe: Recipe, options: BaseModel) -> list[str]:
        # the tokenizer is resolved here, so the plan shows which directory is read
        own = getattr(options, "tokenizer", None) or getattr(options, "custom_tokenizer", None)
        update: dict[str, Any] = {"tokenizer": own or recipe.engine.model}
        if "custom_tokenizer" in type(options).model_fields:
            update["custom_tokenizer"] = None
        return super().argv(recipe, options.model_copy(update=update))

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        yield from super().validate(recipe, options)
        yield from _tokenizer_problem(recipe, options, self.name)


class SaBench(_Prompted):
    name: ClassVar[str] = "sa-bench"
    summary: ClassVar[str] = (
        "serving throughput and TTFT/ITL/latency percentiles per concurrency (srtctl's sa-bench)"
    )
    Options: ClassVar[type[SaBenchOptions]] = SaBenchOptions


class MooncakeRouter(_Prompted):
    name: ClassVar[str] = "mooncake-router"
    summary: ClassVar[str] = (
        "a Mooncake trace (shared prefixes) replayed at its timestamps: throughput, goodput,"
        " TTFT/ITL/latency percentiles (srtctl's mooncake-router)"
    )
    Options: ClassVar[type[MooncakeRouterOptions]] = MooncakeRouterOptions


class TraceReplay(_Prompted):
    name: ClassVar[str] = "trace-replay"
    summary: ClassVar[str] = (
        "a local trace file replayed with its timing per concurrency: throughput, goodput,"
        " TTFT/ITL/latency percentiles (srtctl's trace-replay)"
    )
    Options: ClassVar[type[TraceReplayOptions]] = TraceReplayOptions


class Gsm8k(_Kind):
    name: ClassVar[str] = "gsm8k"
    summary: ClassVar[str] = "grade-school math accuracy (srtctl's gsm8k), offline dataset"
    Options: ClassVar[type[Gsm8kOptions]] = Gsm8kOptions


class Gpqa(_Kind):
    name: ClassVar[str] = "gpqa"
    summary: ClassVar[str] = "graduate-level multiple-choice accuracy (srtctl's gpqa)"
    Options: ClassVar[type[GpqaOptions]] = GpqaOptions


KINDS: tuple[type[BenchmarkKind], ...] = (SaBench, Gsm8k, Gpqa, MooncakeRouter, TraceReplay)
OPTIONS: dict[str, type[BaseModel]] = {k.name: k.Options for k in KINDS}
