"""Dynamo mocker workers (doc §6 "mocker"): simulated engines, no GPU needed."""

from __future__ import annotations

from srt_srtctl.backends.common import disaggregation_mode
from srt_srtctl.context import BuildContext
from srt_srtctl.flags import config_to_flags
from srt_srtctl.process import ProcessSpec
from srt_srtctl.schema import MockerBackend
from srt_srtctl.topology import Endpoint, WorkerProcess
from srt_srtctl.workers import per_process_worker


def _num(value: float) -> str:
    return str(float(value))


def worker_argv(ctx: BuildContext, endpoint: Endpoint, proc: WorkerProcess) -> list[str]:
    b = ctx.config.backend
    assert isinstance(b, MockerBackend)
    argv = ["python3", "-m", "dynamo.mocker", "--model-path", ctx.model_arg]
    argv += disaggregation_mode(proc)
    if proc.role == "prefill" and proc.bootstrap_port is not None:
        argv += ["--bootstrap-ports", str(proc.bootstrap_port)]
    argv += ["--engine-type", b.engine_type, "--speedup-ratio", _num(b.speedup_ratio)]
    if b.decode_speedup_ratio != 1.0:
        argv += ["--decode-speedup-ratio", _num(b.decode_speedup_ratio)]
    argv += ["--data-parallel-size", str(b.data_parallel_size)]
    argv += ["--num-gpu-blocks-override", str(b.num_gpu_blocks_override)]
    argv += ["--max-num-seqs", str(b.max_num_seqs)]
    argv += ["--max-num-batched-tokens", str(b.max_num_batched_tokens)]
    argv += _non_default_flags(b)
    drop: list[str] = []
    if ctx.fidelity.fixed("duplicate-flags"):
        drop = [a[2:] for a in argv if a.startswith("--")]
    argv += config_to_flags(ctx.mode_config(proc.mode), drop=drop)
    return argv


def _non_default_flags(b: MockerBackend) -> list[str]:
    """Flags the mocker gets only when the recipe moves them off their defaults."""
    optional: list[tuple[str, object]] = [
        ("--block-size", b.block_size),
        ("--num-workers", b.num_workers if b.num_workers > 1 else None),
        ("--startup-time", b.startup_time),
        ("--kv-transfer-bandwidth", b.kv_transfer_bandwidth),
        ("--kv-cache-dtype", b.kv_cache_dtype),
    ]
    argv = [item for flag, value in optional if value is not None for item in (flag, str(value))]
    if not b.enable_prefix_caching:
        argv.append("--no-enable-prefix-caching")
    if not b.enable_chunked_prefill:
        argv.append("--no-enable-chunked-prefill")
    if b.preemption_mode is not None:
        argv += ["--preemption-mode", b.preemption_mode]
    return argv


def build_workers(ctx: BuildContext) -> list[ProcessSpec]:
    specs = []
    for endpoint in ctx.topology.endpoints:
        for proc in ctx.topology.processes_of(endpoint):
            argv = worker_argv(ctx, endpoint, proc)
            specs.append(per_process_worker(ctx, endpoint, proc, argv, gpu_env=True))
    return specs
