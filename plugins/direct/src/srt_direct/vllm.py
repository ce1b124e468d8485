"""Engine ``vllm``: ``vllm serve`` answering the job's public port itself, no frontend process
(srtctl's ``frontend.type: vllm``): one aggregated worker, on one node or several."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    Engine,
    EngineProcess,
    InstanceContext,
    Problem,
    Recipe,
    WorkerProcess,
    backend_flags,
    config_value,
    worker_slots,
)

from srt_direct.common import (
    CommonOptions,
    http_probe,
    model_problems,
    owned_problems,
    role_config,
)

#: what srtctl derives from the layout: the recipe's copy is dropped, with a warning
DERIVED = frozenset({"host", "port", "master-addr", "nnodes", "node-rank", "headless"})
#: ``connector`` chooses a KV connector elsewhere; it is not a ``vllm serve`` flag
SPECIAL = frozenset({"connector"})


class VllmOptions(CommonOptions):
    """Settings of the ``vllm`` engine (``engine.options``)."""

    set_cuda_visible_devices: bool = Field(
        True,
        description="srt sets `CUDA_VISIBLE_DEVICES` for a worker on part of a node (`vllm"
        " serve` takes no `--device-ids`); `false` leaves the GPUs to the recipe.",
    )


def served_name(recipe: Recipe) -> str:
    """What ``vllm serve`` answers to: the config's or engine's name, else the model as given
    (vLLM's own default, not its last part)."""
    return str(
        config_value(role_config(recipe, "agg"), "served-model-name")
        or recipe.engine.served_model_name
        or recipe.engine.model
        or ""
    )


def _shape_problems(recipe: Recipe) -> Iterator[Problem]:
    """Only what the engine builds is its business: a role or frontend with a hand-written
    command is the recipe's (an existing recipe must not break when srt-direct is installed)."""
    extra = [r for r, spec in recipe.roles.items() if r != "agg" and spec.command is None]
    for role in extra:
        yield Problem(
            ("roles", role),
            "frontend.type vllm serves one aggregated worker (`vllm serve` has no"
            " disaggregated router): use roles.agg, or frontend.type dynamo",
        )
    agg = recipe.roles.get("agg")
    if agg is not None and agg.command is None and agg.workers != 1:
        yield Problem(
            ("roles", "agg", "workers"),
            "must be 1 with frontend.type vllm: the worker serves the public port itself",
        )
    front = recipe.frontend
    if front is not None and front.command is None and front.replicas != 1:
        yield Problem(
            ("frontend", "replicas"),
            "must be 1 with frontend.type vllm: there is no frontend process to replicate",
        )


class VllmEngine(Engine):
    name: ClassVar[str] = "vllm"
    summary: ClassVar[str] = (
        "vllm serve on the public port, no frontend process (one aggregated worker), as srtctl"
        " builds it"
    )
    backends: ClassVar[frozenset[str]] = frozenset({"vllm"})
    runs_frontend: ClassVar[bool] = False
    Options: ClassVar[type[VllmOptions]] = VllmOptions

    def validate(self, recipe: Recipe, options: Any) -> Iterable[Problem]:
        yield from model_problems(recipe, "srt-direct's vllm engine")
        yield from _shape_problems(recipe)
        yield from owned_problems(recipe, DERIVED, "srt-direct's vllm engine")

    def worker(
        self,
        recipe: Recipe,
        options: Any,
        process: WorkerProcess,
        processes: Sequence[WorkerProcess],
        ctx: InstanceContext,
    ) -> EngineProcess:
        opts: VllmOptions = options
        slots = worker_slots(processes, opts.ports)[process.process_index]
        worker = process.worker
        assert recipe.frontend is not None
        port = recipe.frontend.port
        config = role_config(recipe, worker.role)
        argv = ["vllm", "serve", recipe.engine.model or ""]
        if process.leader:
            argv += ["--host", "0.0.0.0", "--port", str(port)]  # noqa: S104
        if recipe.engine.served_model_name and not config_value(config, "served-model-name"):
            argv += ["--served-model-name", recipe.engine.served_model_name]
        if len(worker.nodes) > 1:
            argv += ["--master-addr", worker.nodes[0].ip, "--nnodes", str(len(worker.nodes))]
            argv += ["--node-rank", str(process.rank)]
            if not process.leader:
                argv.append("--headless")
        dropped = DERIVED | SPECIAL
        if not process.leader:
            dropped |= {"api-server-count"}
        argv += backend_flags(config, drop=dropped)
        forced = {
            "VLLM_NIXL_SIDE_CHANNEL_PORT": str(slots.nixl_port),
            "VLLM_NIXL_SIDE_CHANNEL_HOST": "{node_ip}",
        }
        if len(worker.nodes) == 1:
            forced["VLLM_PORT"] = str(slots.vllm_port)
        return EngineProcess(
            argv=argv,
            forced_env=forced,
            readiness=http_probe(
                port,
                "/v1/models",
                opts.readiness_timeout_seconds,
                {"json": "data[].id", "equals": served_name(recipe)},
            )
            if process.leader
            else None,
            ports=(port,) if process.leader else (),
            visible_devices=opts.set_cuda_visible_devices,
        )

    def frontend(
        self, recipe: Recipe, options: Any, ctx: InstanceContext, port: int
    ) -> EngineProcess:
        raise NotImplementedError("the vllm engine runs no frontend: the worker serves")
