"""`profiling:` (doc §13): worker env, nsys argv prefix and the benchmark client's env.

The benchmark script drives the profiler over HTTP (start/stop_profile), so the client needs the
worker addresses and steps; the workers need the mode and the output location.
"""

from __future__ import annotations

from srt_srtctl.context import BuildContext
from srt_srtctl.environment import EnvBuilder
from srt_srtctl.schema import ModeSteps
from srt_srtctl.topology import HTTP_PORT_BASE, WorkerProcess

SHORT = {"prefill": "prefill", "decode": "decode", "aggregated": "agg"}


def _steps(ctx: BuildContext, mode: str) -> ModeSteps | None:
    prof = ctx.config.profiling
    return {"prefill": prof.prefill, "decode": prof.decode, "aggregated": prof.aggregated}[mode]


def profiling_enabled(ctx: BuildContext) -> bool:
    return ctx.config.profiling.type != "none"


def _modes(ctx: BuildContext) -> list[str]:
    return ["prefill", "decode"] if ctx.config.is_disaggregated else ["aggregated"]


def _step_env(ctx: BuildContext, mode: str, env: EnvBuilder) -> None:
    steps = _steps(ctx, mode)
    short = SHORT[mode].upper()
    if steps is not None:
        if steps.start_step is not None:
            env.set(f"PROFILE_{short}_START_STEP", str(steps.start_step))
        if steps.stop_step is not None:
            env.set(f"PROFILE_{short}_STOP_STEP", str(steps.stop_step))


def profiling_worker_env(ctx: BuildContext, proc: WorkerProcess, env: EnvBuilder) -> None:
    if not profiling_enabled(ctx):
        return
    ptype = ctx.config.profiling.type
    mode = proc.mode
    env.set("PROFILING_MODE", SHORT[mode])
    env.set("PROFILE_TYPE", ptype)
    _step_env(ctx, mode, env)
    if ptype == "torch":
        log_dir = "/logs" if ctx.fidelity.fixed("torch-profiler-host-path") else ctx.values.log_dir
        env.set("SGLANG_TORCH_PROFILER_DIR", f"{log_dir}/profiles/{SHORT[mode]}")
    steps = _steps(ctx, mode)
    if ptype.startswith("nsys") and steps is not None and steps.start_step is not None:
        env.set("TLLM_PROFILE_START_STOP", f"{steps.start_step}-{steps.stop_step}")
        env.set("TLLM_LLMAPI_ENABLE_NVTX", "1")


def nsys_prefix(ctx: BuildContext, proc: WorkerProcess, *, trtllm: bool) -> list[str]:
    if not ctx.config.profiling.type.startswith("nsys"):
        return []
    short = SHORT[proc.mode]
    gpus = ",".join(str(g) for g in proc.gpu_indices)
    argv = ["nsys", "profile", "-t", "cuda,nvtx,ucx" if trtllm else "cuda,nvtx"]
    argv += ["--cuda-graph-trace=node", "-c", "cudaProfilerApi", "--capture-range-end", "stop"]
    argv += ["--force-overwrite", "true"]
    extra = ctx.config.profiling.nsys_extra_args
    if extra:
        argv += extra.split() if isinstance(extra, str) else list(extra)
    if trtllm:
        argv += ["--kill", "none", "--wait", "all"]
    if ctx.frontend_type == "dynamo":
        argv.append("--trace-fork-before-exec=true")
    name = f"{proc.node}_{short}_w{proc.index}_profile_gpu{gpus}"
    argv += ["-o", f"/logs/profiles/{short}/{name}"]
    return argv


def profiling_benchmark_env(ctx: BuildContext, env: EnvBuilder) -> None:
    if not profiling_enabled(ctx):
        return
    ptype = ctx.config.profiling.type
    env.set("PROFILE_TYPE", ptype)
    for mode in _modes(ctx):
        _step_env(ctx, mode, env)
    if ptype == "torch":
        env.set("SGLANG_TORCH_PROFILER_DIR", "/logs/profiles")
    for mode in _modes(ctx):
        role = "agg" if mode == "aggregated" else mode
        leaders = [p for p in ctx.topology.processes if p.role == role and p.is_leader]
        short = SHORT[mode].upper()
        env.set(f"PROFILE_{short}_IPS", ",".join(ctx.values.ip(p.node) for p in leaders))
        env.set(
            f"PROFILE_{short}_ENDPOINTS",
            ",".join(f"{ctx.values.ip(p.node)}:{p.sys_port}" for p in leaders),
        )
    env.set("PROFILE_OUTPUT_DIR", "/logs/profiles")
    env.set("BENCH_MODEL_NAME", ctx.served_model_name)
    env.set("HEAD_NODE", ctx.topology.roles.head)
    env.set("HEAD_PORT", str(ctx.topology.frontend.public_port))
    env.set("PROFILE_WORKER_PORT", str(HTTP_PORT_BASE))
