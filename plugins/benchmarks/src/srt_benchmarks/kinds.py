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
from srt_benchmarks.options import GpqaOptions, Gsm8kOptions, SaBenchOptions

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


class SaBench(_Kind):
    name: ClassVar[str] = "sa-bench"
    summary: ClassVar[str] = (
        "serving throughput and TTFT/ITL/latency percentiles per concurrency (srtctl's sa-bench)"
    )
    Options: ClassVar[type[SaBenchOptions]] = SaBenchOptions

    def argv(self, recipe: Recipe, options: BaseModel) -> list[str]:
        assert isinstance(options, SaBenchOptions)
        # the tokenizer is resolved here, so the plan shows which directory is read
        tokenizer = options.tokenizer or options.custom_tokenizer or recipe.engine.model
        settled = options.model_copy(update={"tokenizer": tokenizer, "custom_tokenizer": None})
        return super().argv(recipe, settled)

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        yield from super().validate(recipe, options)
        if not (options.tokenizer or options.custom_tokenizer or recipe.engine.model):
            yield Problem(
                ("benchmark", "options", "tokenizer"),
                "is required when engine.model is not set: sa-bench builds its prompts with"
                " the model's tokenizer",
            )


class Gsm8k(_Kind):
    name: ClassVar[str] = "gsm8k"
    summary: ClassVar[str] = "grade-school math accuracy (srtctl's gsm8k), offline dataset"
    Options: ClassVar[type[Gsm8kOptions]] = Gsm8kOptions


class Gpqa(_Kind):
    name: ClassVar[str] = "gpqa"
    summary: ClassVar[str] = "graduate-level multiple-choice accuracy (srtctl's gpqa)"
    Options: ClassVar[type[GpqaOptions]] = GpqaOptions


KINDS: tuple[type[BenchmarkKind], ...] = (SaBench, Gsm8k, Gpqa)
OPTIONS: dict[str, type[BaseModel]] = {k.name: k.Options for k in KINDS}
