"""``trtllm-llmapi-launch python3 -m dynamo.trtllm``: TensorRT-LLM behind Dynamo's frontend.

The role's config is not turned into flags: it is the engine's YAML file (srtctl writes it
with ``yaml.safe_dump``, keys sorted), written into the job's log directory before launch.
The worker is one MPI launch with one rank per GPU; a worker wider than a node is one
launch across its nodes (one srun step with a rank per GPU on each node).
"""

from __future__ import annotations

from typing import Any

from srt_dynamo.backends.base import Backend
from srt_dynamo.build import WorkerBuild
from srt_dynamo.environment import nsys_prefix

MODULE = "dynamo.trtllm"
NUMA_GPU_TYPES = ("gb200", "gb300")


def engine_config(b: WorkerBuild) -> dict[str, Any]:
    config = b.config
    if b.options.publish_events_and_metrics:
        config.setdefault("enable_iter_perf_stats", True)
        config.setdefault("return_perf_metrics", True)
    return config


def config_path(b: WorkerBuild) -> str:
    return f"{{log_dir}}/trtllm_config_{b.short}.yaml"


def engine_yaml(b: WorkerBuild) -> str:
    # PyYAML loads here, not with the plugin: every Dynamo recipe imports this backend
    import yaml

    return yaml.safe_dump(engine_config(b))


def uses_numactl(b: WorkerBuild) -> bool:
    bind = b.options.numa_memory_bind
    if bind is not None:
        return bind
    gpu = (b.options.gpu_type or "").lower()
    return b.role != "agg" and gpu in NUMA_GPU_TYPES


def launch_prefix(b: WorkerBuild) -> list[str]:
    """``[nsys ...] [numactl -m 0,1] trtllm-llmapi-launch``: shared with trtllm-serve."""
    out = nsys_prefix(b.options, b.mode, b.name, b.gpus, trtllm=True, dynamo=True)
    if uses_numactl(b):
        out += ["numactl", "-m", "0,1"]
    return [*out, "trtllm-llmapi-launch"]


def argv(b: WorkerBuild) -> list[str]:
    b.files[config_path(b)] = engine_yaml(b)
    out = launch_prefix(b)
    out += [b.python, "-m", MODULE, "--model-path", b.model, "--served-model-name", b.served]
    out += b.disaggregation()
    out += ["--extra-engine-args", config_path(b)]
    out += b.request_plane()
    if b.options.publish_events_and_metrics:
        out.append("--publish-events-and-metrics")
    return out


def forced_env(b: WorkerBuild) -> dict[str, str]:
    # srtctl draws a fresh uuid4 per launch; a name unique to the job and worker is as
    # unique on a node and keeps the plan reproducible
    return {"TRTLLM_EPLB_SHM_NAME": f"moe_shared_{{job_id}}_{b.role}_{b.proc.worker.index}"}


def mpi_options(gpus: int, spans: bool = False) -> dict[str, str]:
    """One MPI rank per GPU of the worker, in one step (srtctl's srun shape). A worker
    across nodes (``spans``) gets its task counts from srt (``EngineProcess.tasks_per_node``:
    ``--ntasks``, ``--ntasks-per-node``, ``--nodes``), not from an option here."""
    if spans:
        return {"mpi": "pmix", "oversubscribe": "", "cpu-bind": "verbose,none"}
    return {"mpi": "pmix", "ntasks": str(gpus), "oversubscribe": "", "cpu-bind": "verbose,none"}


BACKEND = Backend(argv=argv, owned=frozenset(), forced_env=forced_env)
