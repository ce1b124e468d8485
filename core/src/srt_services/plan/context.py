"""What every part of planning shares during one :func:`~.resolve.resolve` run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services.recipe.problems import ProblemList

if TYPE_CHECKING:
    from srt_services.checking.load import LoadedRecipe
    from srt_services.checking.settled import Settled
    from srt_services.contracts.context import JobPaths, Layout
    from srt_services.contracts.engine import WorkerProcess
    from srt_services.contracts.plan import PlannedRestart, ScrapeTarget
    from srt_services.plan.ports import PortLedger
    from srt_services.plugins.manager import PluginSet


@dataclass(slots=True)
class PlanContext:
    loaded: LoadedRecipe
    plugins: PluginSet
    layout: Layout
    paths: JobPaths
    #: the job's placeholder values, the same for every instance (see :mod:`.values`)
    common: dict[str, str]
    ledger: PortLedger
    #: node name -> position in ``layout.compute`` (``{node_id}``), computed once
    node_ids: dict[str, int]
    #: the plan's restart record of services that write no ``restart``: one shared record
    #: (never mutated), as most services use the default
    default_restart: PlannedRestart | None
    #: the services the plan runs (the recipe's, less those that cannot run here)
    services: list[Settled]
    #: the site's ``[binaries]`` (a server kind's command name -> the path to run)
    binaries: Mapping[str, str] = field(default_factory=dict)
    #: the launcher runs images (``container``): false for a plan the local launcher runs,
    #: where a host-native kind's fallback image does not apply (it runs its host binary)
    containers: bool = True
    #: the site's least readiness budget for probes whose recipe gives none (0: none)
    readiness_floor: float = 0.0
    #: bounded like the checks' (see :class:`~srt_services.recipe.problems.ProblemList`)
    problems: ProblemList = field(default_factory=ProblemList)
    warnings: list[str] = field(default_factory=list)
    #: the metrics endpoints of the instances planned so far (see :mod:`.targets`)
    targets: list[ScrapeTarget] = field(default_factory=list)
    #: the recipe's ``mounts``, rendered once (every containerized instance shares the list)
    mounts: list[str] = field(default_factory=list)
    #: every worker process of the job, once computed (see :meth:`worker_processes`)
    _processes: list[WorkerProcess] | None = None

    def worker_processes(self) -> list[WorkerProcess]:
        """Every worker process in layout order, as the engine sees them (computed once)."""
        if self._processes is None:
            from srt_services.contracts.engine import worker_processes

            self._processes = worker_processes(self.layout)
        return self._processes
