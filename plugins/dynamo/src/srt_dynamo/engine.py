"""The ``dynamo`` engine: Dynamo's frontend and ``python3 -m dynamo.<backend>`` workers,
built as srtctl builds them, from schema-2 settings."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from srt_services.extend import (
    Engine,
    EngineProcess,
    InstanceContext,
    Problem,
    Recipe,
    WorkerProcess,
)

from srt_dynamo import validate
from srt_dynamo.backends import BACKENDS
from srt_dynamo.backends.trtllm import mpi_options
from srt_dynamo.build import WorkerBuild
from srt_dynamo.environment import profiling_env, worker_env
from srt_dynamo.frontend import build_frontend
from srt_dynamo.health import system_probe
from srt_dynamo.install import install_command
from srt_dynamo.options import DynamoOptions
from srt_dynamo.sequential import sequential_wait
from srt_dynamo.slots import Slots, slot_table


class DynamoEngine(Engine):
    name: ClassVar[str] = "dynamo"
    summary: ClassVar[str] = (
        "NVIDIA Dynamo: its frontend and python3 -m dynamo.<backend> workers (mocker, sglang,"
        " vllm, trtllm), as srtctl builds them"
    )
    backends: ClassVar[frozenset[str]] = frozenset(BACKENDS)
    runs_frontend: ClassVar[bool] = True
    Options: ClassVar[type[DynamoOptions]] = DynamoOptions
    frontend_stop_grace: ClassVar[float] = 20.0
    # a mocker drains every in-flight request on SIGTERM, with no time limit of its own
    worker_stop_grace: ClassVar[float] = 30.0

    def __init__(self) -> None:
        # the slot table of the plan being built: computed once, not once per process
        self._table_for: Sequence[WorkerProcess] | None = None
        self._table: list[Slots] = []

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        return validate.problems(recipe, options)

    def job_env(self, recipe: Recipe, options: Any) -> dict[str, str]:
        """Every Dynamo process, a hand-written one too, uses the recipe's planes, and a
        frontend listens on ``frontend.port`` (or ``internal_port`` behind srt's balancer; only the
        frontend reads DYN_HTTP_PORT)."""
        env: dict[str, str] = {
            "DYN_REQUEST_PLANE": recipe.dynamo.request_plane,
            "DYN_EVENT_PLANE": recipe.dynamo.event_plane,
        }
        if recipe.frontend is not None:
            env["DYN_HTTP_PORT"] = str(validate.listen_port(recipe))
        return env

    def _slots(
        self, recipe: Recipe, options: DynamoOptions, processes: Sequence[WorkerProcess]
    ) -> list[Slots]:
        if self._table_for is not processes:
            self._table = slot_table(recipe, processes, options.ports, options.dp_launch_mode)
            self._table_for = processes
        return self._table

    def worker(
        self,
        recipe: Recipe,
        options: Any,
        process: WorkerProcess,
        processes: Sequence[WorkerProcess],
        ctx: InstanceContext,
    ) -> EngineProcess:
        opts: DynamoOptions = options
        table = self._slots(recipe, opts, processes)
        slots = table[process.process_index]
        build = WorkerBuild(recipe, opts, process, slots, table, processes)
        backend = BACKENDS[recipe.engine.type]
        argv = backend.argv(build)
        env = worker_env(recipe, opts, build.mode)
        forced = {"DYN_SYSTEM_PORT": str(slots.sys_port)}
        forced.update(profiling_env(opts, build.mode))
        forced.update(backend.forced_env(build))
        ports = [slots.sys_port]
        if slots.bootstrap_port is not None and process.leader:
            ports.append(slots.bootstrap_port)
        if recipe.engine.type == "sglang" and slots.http_port is not None:
            ports.append(slots.http_port)
        srun: dict[str, str] = {}
        # a trtllm worker wider than a node is one MPI launch across its nodes, a rank per GPU
        spans = recipe.engine.type == "trtllm" and len(process.worker.nodes) > 1
        if recipe.engine.type == "trtllm":
            srun = mpi_options(len(process.worker.gpus), spans)
        preamble = _joined(
            install_command(opts.install) if opts.install is not False else None,
            sequential_wait(build),
            _profiles_dir(opts, build),
        )
        return EngineProcess(
            argv=argv,
            env=env,
            forced_env=forced,
            preamble=preamble,
            files=dict(build.files),
            readiness=system_probe(slots.sys_port, opts.readiness_timeout_seconds)
            if process.leader
            else None,
            ports=tuple(dict.fromkeys(ports)),
            srun_options=srun,
            visible_devices=backend.visible_devices(build),
            spans_nodes=spans,
            tasks_per_node=len(process.worker.gpus) if spans else 1,
        )

    def frontend(
        self, recipe: Recipe, options: Any, ctx: InstanceContext, port: int
    ) -> EngineProcess:
        return build_frontend(recipe, options, port)


def _profiles_dir(options: DynamoOptions, build: WorkerBuild) -> str | None:
    """nsys and torch write into the log directory's ``profiles/<mode>``, which must exist."""
    if options.profiling is None:
        return None
    return f"mkdir -p {{log_dir}}/profiles/{build.short}"


def _joined(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return " && ".join(kept) if kept else None
