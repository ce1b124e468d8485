"""Build the whole job of one variant: every process srtctl would launch, in launch order.

This is the one entry point srt needs: `build_job(config, nodes)` gives processes (argv, env,
container, srun shape), generated files, the health check and the benchmark, with run-time
values left as placeholders unless a `RuntimeValues` supplies them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from srt_srtctl import backends, frontends, infra
from srt_srtctl.backends import trtllm
from srt_srtctl.benchmarks import REGISTERED, BenchmarkPlan, UnknownBenchmarkError, build_benchmark
from srt_srtctl.cluster import EMPTY, ClusterConfig
from srt_srtctl.context import BuildContext
from srt_srtctl.deviations import Fidelity
from srt_srtctl.errors import Problem, RecipeError
from srt_srtctl.health import HealthCheck, build_health_check
from srt_srtctl.process import ProcessSpec
from srt_srtctl.schema import SrtConfig
from srt_srtctl.topology import Topology, build_topology, total_node_count
from srt_srtctl.values import DEFAULT_VALUES, RuntimeValues, placeholder_nodes


@dataclass
class JobPlan:
    config: SrtConfig
    node_count: int
    topology: Topology
    processes: list[ProcessSpec]
    health_check: HealthCheck
    benchmark: BenchmarkPlan | None
    infra_services: dict[str, Any] | None
    generated_files: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def node_roles(self) -> dict[str, list[str]]:
        """Per node, what runs there, as the oracle lists it."""
        roles = self.topology.roles
        out: dict[str, list[str]] = {n: [] for n in roles.all_nodes}
        for marker, node in (
            ("[head]", roles.head),
            ("[infra]", roles.infra),
            ("[bench]", roles.bench),
        ):
            out[node].append(marker)
        for proc in self.processes:
            if proc.worker is None:
                label = f"{proc.stage}:{proc.name}"
                for node in proc.nodes:
                    out[node].append(label)
                continue
            w = proc.worker
            gpus = ",".join(str(g) for g in w.gpu_indices)
            if w.launch == "per_endpoint" and len(proc.nodes) > 1:
                text = f"one MPI srun over {len(proc.nodes)} nodes,gpus={gpus}"
                for node in proc.nodes:
                    out[node].append(f"workers:{w.role}_{w.index}({text})")
            else:
                out[w.node].append(f"workers:{w.role}_{w.index}(rank{w.node_rank},gpus={gpus})")
        return {n: labels for n, labels in out.items() if labels}


def build_job(
    config: SrtConfig,
    nodes: list[str] | None = None,
    values: RuntimeValues = DEFAULT_VALUES,
    fidelity: Fidelity | None = None,
    cluster: ClusterConfig = EMPTY,
) -> JobPlan:
    fidelity = fidelity or Fidelity()
    count = total_node_count(config)
    if nodes is None:
        nodes = placeholder_nodes(count)
    if fidelity.fixed("unknown-benchmark-at-runtime") and config.benchmark.type not in REGISTERED:
        raise RecipeError(
            [Problem(("benchmark", "type"), f"Unknown benchmark type: {config.benchmark.type}")]
        )
    topology = build_topology(config, nodes)
    ctx = BuildContext(config, topology, values, fidelity, cluster)
    processes = _infra_processes(ctx)
    if ctx.is_hf_model:
        _hf_model_notes(ctx)
    processes += backends.build_workers(ctx)
    processes += frontends.build_frontends(ctx)
    errors: list[str] = []
    bench: BenchmarkPlan | None = None
    try:
        bench = build_benchmark(ctx)
    except UnknownBenchmarkError as exc:
        errors.append(str(exc))
    if bench is not None and bench.process is not None:
        processes.append(bench.process)
    if fidelity.fixed("idle-gpus"):
        ctx.warnings.extend(_idle_gpu_warnings(ctx))
    return JobPlan(
        config=config,
        node_count=count,
        topology=topology,
        processes=processes,
        health_check=build_health_check(ctx),
        benchmark=bench,
        infra_services=infra.infra_services(ctx),
        generated_files=generated_files(ctx),
        warnings=ctx.warnings,
        notes=ctx.notes,
        errors=errors,
    )


def _infra_processes(ctx: BuildContext) -> list[ProcessSpec]:
    processes: list[ProcessSpec] = []
    infra_proc = infra.build_infra(ctx)
    if infra_proc is not None:
        processes.append(infra_proc)
    else:
        ctx.notes.append(f"etcd/nats not started (frontend.type={ctx.frontend_type})")
    mooncake = infra.build_mooncake(ctx)
    if mooncake is not None:
        processes.append(mooncake)
    return processes


def generated_files(ctx: BuildContext) -> dict[str, str]:
    """Files srtctl writes into the log dir (mounted at /logs): engine YAML, nginx.conf ..."""
    files = frontends.generated_files(ctx)
    if ctx.config.backend_type == "trtllm":
        files.update(trtllm.generated_files(ctx))
    store = infra.mooncake_store_json(ctx)
    if store is not None:
        files["mooncake_store_config.json"] = store
    return files


def _hf_model_notes(ctx: BuildContext) -> None:
    backend = ctx.config.backend
    has_hf_home = any(
        "HF_HOME" in backend.environment_for(m) for m in ("prefill", "decode", "aggregated")
    )
    if has_hf_home:
        return
    ctx.notes.append(
        "HF model: _clean_stale_hf_locks (deletes *.lock older than 30 min under HF_HOME on the "
        "orchestrator host) not executed by the oracle"
    )
    ctx.warnings.append(
        f"WARNING srtctl.cli.do_sweep: HF model '{ctx.hf_id}' specified but HF_HOME is not set in "
        "backend environment config. Workers will use the default HuggingFace cache "
        "(~/.cache/huggingface) which may not be shared across nodes. Set HF_HOME in "
        "prefill_environment/decode_environment to use a shared cache directory "
        "(e.g., HF_HOME: /lustre/fsw/.../common/cache)."
    )


def _idle_gpu_warnings(ctx: BuildContext) -> list[str]:
    gpn = ctx.config.resources.gpus_per_node
    used: dict[str, set[int]] = {n: set() for n in ctx.topology.roles.workers}
    for proc in ctx.topology.processes:
        used.setdefault(proc.node, set()).update(proc.gpu_indices)
    idle = {n: sorted(set(range(gpn)) - g) for n, g in used.items() if len(g) < gpn}
    return [f"idle GPUs on {n}: {','.join(map(str, gpus))}" for n, gpus in idle.items()]
