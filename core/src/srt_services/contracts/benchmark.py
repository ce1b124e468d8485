"""The benchmark interface: a load generator or an accuracy suite as the job's last step.

``benchmark.type: command`` runs the recipe's own command; a benchmark plugin builds the
command from declarative settings instead (``benchmark.type: sa-bench``,
``benchmark.options: {isl: 1024, osl: 1024, concurrencies: [64]}``), pointed at the job's
frontend and model. Whatever runs, srt tells the benchmark where to leave its summary
(``SRT_BENCHMARK_RESULT``, a JSON file): the summary lands in ``result.json`` under
``benchmark``, so throughput and latency percentiles are read from one place for every
job.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel
from srt_services.contracts.kind import NoOptions

if TYPE_CHECKING:
    from srt_services.contracts.context import InstanceContext
    from srt_services.contracts.engine import EngineProcess
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem

#: The variable naming the file a benchmark writes its summary to (JSON).
RESULT_VAR = "SRT_BENCHMARK_RESULT"


class BenchmarkKind:
    """Base class of benchmark kinds. Subclass it and set ``name``; registered through
    ``srt_register_benchmarks``; ``benchmark.type: <name>`` selects it."""

    #: The ``benchmark.type`` value that selects it. Unique across the plugin set.
    name: ClassVar[str]
    summary: ClassVar[str] = ""
    #: Model of ``benchmark.options``; unknown keys are refused naming the benchmark.
    Options: ClassVar[type[BaseModel]] = NoOptions

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        """Problems beyond the options model, with paths from the recipe's root."""
        return ()

    def process(self, recipe: Recipe, options: Any, ctx: InstanceContext) -> EngineProcess:
        """The benchmark's command and environment on the client node. The frontend's
        address is ``SRT_FRONTEND_URL`` in the environment srt gives it (and
        ``{frontend_port}`` among the placeholders); the model is ``recipe.engine``'s."""
        raise NotImplementedError
