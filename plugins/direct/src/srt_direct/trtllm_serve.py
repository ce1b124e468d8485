"""Engine ``trtllm-serve``: TensorRT-LLM's own server (srtctl's ``frontend.type: trtllm_serve``).

Aggregated, the single worker serves the public port itself. Disaggregated, every worker
serves on its own port and ``trtllm-serve disaggregated`` routes between them, reading
``ser.yaml`` (which names each worker's address), written into the log directory. Each
worker is one MPI launch with a rank per GPU, across its nodes for a worker wider than a
node; the role's config is the engine's YAML file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

import yaml
from pydantic import Field
from srt_services.extend import (
    Engine,
    EngineProcess,
    InstanceContext,
    Problem,
    Recipe,
    WorkerProcess,
    worker_slots,
)

from srt_direct.common import (
    SHORT,
    CommonOptions,
    disaggregated,
    http_probe,
    leaders,
    model_problems,
    role_config,
)

NUMA_GPU_TYPES = ("gb200", "gb300")
PARALLEL_KEYS = ("tensor_parallel_size", "moe_expert_parallel_size", "pipeline_parallel_size")
SER_YAML = "{log_dir}/ser.yaml"


class TrtllmServeOptions(CommonOptions):
    """Settings of the ``trtllm-serve`` engine (``engine.options``)."""

    gpu_type: str | None = Field(
        None,
        description="The nodes' GPU model (srtctl's `resources.gpu_type`); `gb200`/`gb300`"
        " turn on `numactl -m 0,1` for disaggregated workers.",
    )
    numa_memory_bind: bool | None = Field(
        None, description="`numactl -m 0,1` before each worker (`null`: by `gpu_type`)."
    )


def _config_path(role: str) -> str:
    return f"{{log_dir}}/trtllm_config_{SHORT[role]}.yaml"


def ser_config(
    recipe: Recipe, ctx: InstanceContext, opts: TrtllmServeOptions, port: int
) -> dict[str, Any]:
    found = list(leaders(ctx.layout, opts.ports))
    ctx_urls = [f"{p.node.ip}:{s.http_port}" for p, s in found if p.worker.role == "prefill"]
    gen_urls = [f"{p.node.ip}:{s.http_port}" for p, s in found if p.worker.role == "decode"]
    return {
        "hostname": "0.0.0.0",  # noqa: S104
        "port": port,
        "context_servers": {"num_instances": len(ctx_urls), "urls": ctx_urls},
        "generation_servers": {"num_instances": len(gen_urls), "urls": gen_urls},
    }


def _agg_problems(recipe: Recipe) -> Iterator[Problem]:
    agg = recipe.roles.get("agg")
    if agg is not None and agg.command is None and not disaggregated(recipe) and agg.workers != 1:
        yield Problem(
            ("roles", "agg", "workers"),
            "must be 1 with an aggregated trtllm-serve job: the worker serves the public port",
        )


class TrtllmServeEngine(Engine):
    name: ClassVar[str] = "trtllm-serve"
    summary: ClassVar[str] = (
        "trtllm-serve workers; disaggregated, trtllm-serve disaggregated routes between them"
        " (ser.yaml), as srtctl builds them"
    )
    backends: ClassVar[frozenset[str]] = frozenset({"trtllm"})
    Options: ClassVar[type[TrtllmServeOptions]] = TrtllmServeOptions

    def runs_frontend_for(self, recipe: Recipe) -> bool:
        return disaggregated(recipe)

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        yield from model_problems(recipe, "srt-direct's trtllm-serve engine")
        yield from _agg_problems(recipe)

    def worker(
        self,
        recipe: Recipe,
        options: Any,
        process: WorkerProcess,
        processes: Sequence[WorkerProcess],
        ctx: InstanceContext,
    ) -> EngineProcess:
        opts: TrtllmServeOptions = options
        slots = worker_slots(processes, opts.ports)[process.process_index]
        role = process.worker.role
        config = role_config(recipe, role)
        assert recipe.frontend is not None
        port = slots.http_port if disaggregated(recipe) else recipe.frontend.port
        assert port is not None
        argv: list[str] = []
        bind = opts.numa_memory_bind
        if bind is None:
            bind = role != "agg" and (opts.gpu_type or "").lower() in NUMA_GPU_TYPES
        if bind:
            argv += ["numactl", "-m", "0,1"]
        argv += ["trtllm-llmapi-launch", "trtllm-serve", recipe.engine.model or ""]
        argv += ["--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
        for key in PARALLEL_KEYS:
            if key in config:
                argv += [f"--{key}", str(config[key])]
        argv += ["--config", _config_path(role)]
        gpus = len(process.worker.gpus)
        # a worker wider than a node is one MPI launch across its nodes: srt gives srun the
        # task counts (a rank per GPU on each node); on one node, --ntasks is the GPUs
        spans = len(process.worker.nodes) > 1
        srun = {"mpi": "pmix", "oversubscribe": "", "cpu-bind": "verbose,none"}
        if not spans:
            srun = {"mpi": "pmix", "ntasks": str(gpus), **srun}
        return EngineProcess(
            argv=argv,
            files={_config_path(role): yaml.safe_dump(config)},
            forced_env={
                "TRTLLM_EPLB_SHM_NAME": f"moe_shared_{{job_id}}_{role}_{process.worker.index}"
            },
            readiness=http_probe(port, "/health", opts.readiness_timeout_seconds),
            ports=(port,),
            srun_options=srun,
            spans_nodes=spans,
            tasks_per_node=gpus if spans else 1,
        )

    def frontend(
        self, recipe: Recipe, options: Any, ctx: InstanceContext, port: int
    ) -> EngineProcess:
        opts: TrtllmServeOptions = options
        return EngineProcess(
            argv=["trtllm-serve", "disaggregated", "--config", SER_YAML],
            files={SER_YAML: yaml.safe_dump(ser_config(recipe, ctx, opts, port))},
            readiness=http_probe(port, "/health", opts.readiness_timeout_seconds),
            ports=(port,),
            srun_options={"mpi": "pmix"},
        )
