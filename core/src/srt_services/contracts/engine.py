"""The engine interface: a serving stack that builds the job's own processes.

A service kind describes one long-running process next to the job; an engine describes the
job itself: which command each worker of each role runs, with which environment, ports and
readiness probe, and how the frontend in front of them starts. The recipe says it
declaratively: ``frontend.type`` names the engine (Dynamo, an SGLang router, ...),
``engine.type`` the backend its workers run (``sglang``, ``vllm``, ``trtllm``, ``mocker``),
``engine.options`` the engine's own settings and ``roles.<role>.config`` the backend's
settings for that role's workers, which the engine turns into the backend's flags (or a
file). A ``command`` the recipe writes still wins: the engine then only adds what its
processes must be told whatever runs (:meth:`Engine.job_env`), so a setting such as Dynamo's
request plane never silently does nothing.

Like a kind's, an engine's methods are pure: they describe, srt acts. Strings they return
may use the recipe's placeholders (``{node_ip}``, ``{log_dir}``, ``{local_dir}``...), which
are rendered exactly like the recipe's own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel
from srt_services.contracts.kind import DefaultProbe, NoOptions

if TYPE_CHECKING:
    from srt_services.contracts.context import InstanceContext, Layout, Node, Worker
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Problem


@dataclass(slots=True)
class EngineProcess:
    """What an engine builds for one process: a worker's instance on one of its nodes, or
    one frontend instance."""

    #: the command; the recipe's ``args`` are appended by srt
    argv: list[str]
    #: the engine's environment; the recipe's ``env`` for that process wins over it
    env: dict[str, str] = field(default_factory=dict)
    #: what the engine must own whatever the recipe says (a port it chose for the process),
    #: applied over the recipe's ``env``
    forced_env: dict[str, str] = field(default_factory=dict)
    #: shell run before the command (a setup script, an install), before the recipe's own
    preamble: str | None = None
    #: files written before launch: ``{log_dir}/<name>`` or a name under ``{work_dir}``
    files: dict[str, str] = field(default_factory=dict)
    #: the probe gating readiness when the recipe writes none
    readiness: DefaultProbe | None = None
    #: every port the process listens on, for the port ledger (refused if two collide)
    ports: tuple[int, ...] = ()
    #: extra ``srun`` options (``mpi: pmix`` for an MPI launch), Slurm only
    srun_options: dict[str, str] = field(default_factory=dict)
    #: srt sets ``CUDA_VISIBLE_DEVICES`` to a worker's GPUs when it has part of a node;
    #: ``False`` for an engine that hands the GPUs over otherwise (vLLM's ``--device-ids``)
    visible_devices: bool = True
    #: the worker's leader process is ONE launch across every node of the worker (an MPI
    #: job: ``srun --nodes=K`` starts its ranks on each node), not a process per node; srt
    #: then plans no instance on the worker's other nodes. Only a launcher that can start
    #: such a step runs it (Slurm); the local launcher refuses it when the plan is made.
    spans_nodes: bool = False
    #: tasks (MPI ranks) the launch starts on each node, with ``spans_nodes``
    tasks_per_node: int = 1


@dataclass(frozen=True, slots=True)
class WorkerProcess:
    """One worker instance as the engine sees it: the worker, its node, and where it
    stands among every worker process of the job (for per-process port formulas)."""

    worker: Worker
    node: Node
    #: the node's position among the worker's nodes (0: the leader)
    rank: int
    #: position among every worker process of the job, in layout order
    process_index: int
    #: how many worker leaders come before this one on its node (0 for followers too)
    leader_slot: int

    @property
    def leader(self) -> bool:
        return self.rank == 0


def worker_processes(layout: Layout) -> list[WorkerProcess]:
    """Every worker process of the job, one per node of each worker, in layout order
    (roles in the recipe's order, workers by index, a worker's nodes leader first)."""
    out: list[WorkerProcess] = []
    leaders: dict[str, int] = {}
    for worker in layout.workers:
        for rank, node in enumerate(worker.nodes):
            slot = 0
            if rank == 0:
                slot = leaders.get(node.name, 0)
                leaders[node.name] = slot + 1
            out.append(WorkerProcess(worker, node, rank, len(out), slot))
    return out


class Engine:
    """Base class of engines. Subclass it, set ``name`` and ``backends``.

    Registered through ``srt_register_engines``. ``frontend.type: <name>`` selects it;
    then every role without a ``command`` and the frontend without one are built here.
    """

    #: The ``frontend.type`` value that selects this engine. Unique across the plugin set.
    name: ClassVar[str]
    #: One line for ``srt kinds`` and the docs.
    summary: ClassVar[str] = ""
    #: ``engine.type`` values whose workers this engine builds.
    backends: ClassVar[frozenset[str]] = frozenset()
    #: Whether the engine runs a frontend process of its own. ``False``: a worker serves
    #: the job's public port itself (``vllm serve``); then :meth:`public_worker` says which.
    runs_frontend: ClassVar[bool] = True
    #: Model of ``engine.options``; unknown keys are refused naming the engine.
    Options: ClassVar[type[BaseModel]] = NoOptions
    #: The frontend's default stop grace (seconds), and the workers'.
    frontend_stop_grace: ClassVar[float] = 20.0
    worker_stop_grace: ClassVar[float] = 30.0

    def runs_frontend_for(self, recipe: Recipe) -> bool:
        """Whether this recipe's job has a frontend process of the engine's: ``runs_frontend``,
        unless the engine decides per recipe (trtllm-serve runs its orchestrator only for a
        disaggregated job; an aggregated worker serves the public port itself)."""
        return self.runs_frontend

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        """Problems of the recipe under this engine, with paths from the recipe's root
        (``("roles", "prefill", "config", "tp")``): a backend it cannot run, a flag in
        ``args`` that contradicts a setting, a config key it refuses."""
        return ()

    def job_env(self, recipe: Recipe, options: Any) -> dict[str, str]:
        """What every worker and the frontend must be told, whoever wrote their command
        (Dynamo's request and event planes): layered over the discovery environment and
        under the engine's own per-process environment and the recipe's ``env``."""
        return {}

    def worker(
        self,
        recipe: Recipe,
        options: Any,
        process: WorkerProcess,
        processes: Sequence[WorkerProcess],
        ctx: InstanceContext,
    ) -> EngineProcess:
        """The command, environment and probe of one worker instance of a role that writes
        no ``command`` (``process.worker.role`` is the role). ``processes`` are every worker
        process of the job (:func:`worker_processes`), for ports that follow a formula
        over the whole job."""
        raise NotImplementedError

    def frontend(
        self, recipe: Recipe, options: Any, ctx: InstanceContext, port: int
    ) -> EngineProcess:
        """One frontend instance's command when the recipe writes none, listening on
        ``port``: ``frontend.port``, or ``frontend.internal_port`` for one of several
        replicas behind the balancer (``ctx.index`` is the replica)."""
        raise NotImplementedError

    def public_worker(self, layout: Layout) -> Worker | None:
        """For an engine without a frontend process: the worker serving the public port."""
        return layout.workers[0] if layout.workers else None


def backend_flags(config: Mapping[str, Any] | None, drop: Iterable[str] = ()) -> list[str]:
    """A role's ``config`` as the backend's command-line flags, the one rule every engine
    uses (so a recipe reads the same whichever engine builds it):

    * keys sorted, ``_`` written as ``-`` (``mem_fraction_static`` is ``--mem-fraction-static``);
    * ``true`` is the bare flag, ``false`` and ``null`` leave it out;
    * a list is the flag followed by each item as its own word (``--cuda-graph-bs 1 2 4``);
    * a mapping (or a list inside a list) is one word of compact JSON, what engines parse
      for their structured flags (``--kv-transfer-config {"kv_connector": ...}``);
    * anything else is its text (``4``, ``0.8``).

    ``drop`` names keys (either spelling) the engine sets itself and leaves out.
    """
    if not config:
        return []
    dropped = {d.replace("_", "-") for d in drop}
    argv: list[str] = []
    for key in sorted(config):
        value = config[key]
        name = key.replace("_", "-")
        if name in dropped or value is None or value is False:
            continue
        if value is True:
            argv.append("--" + name)
        elif isinstance(value, list):
            argv.append("--" + name)
            argv.extend(_word(v) for v in value)
        else:
            argv.extend(["--" + name, _word(value)])
    return argv


def _word(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
