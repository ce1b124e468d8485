"""The benchmark client (doc §10): one srun on the bench node against the public port."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from srt_srtctl.context import BuildContext
from srt_srtctl.environment import EnvBuilder
from srt_srtctl.process import ProcessSpec, SrunSpec
from srt_srtctl.profiling import profiling_benchmark_env
from srt_srtctl.topology import FRONTEND_PUBLIC_PORT
from srt_srtctl.workers import dynamo_wheel_env

SCRIPTS = "/srtctl-benchmarks"
LOCAL_URL = f"http://localhost:{FRONTEND_PUBLIC_PORT}"
REGISTERED = frozenset(
    {
        "sa-bench",
        "gsm8k",
        "gpqa",
        "mooncake-router",
        "trace-replay",
        "custom",
        "manual",
        "router",
        "mmlu",
        "longbenchv2",
        "sglang-bench",
        "lm-eval",
    }
)
RUNNERS = {
    "sa-bench": "SA-Bench",
    "gsm8k": "GSM8K",
    "gpqa": "GPQA",
    "mooncake-router": "Mooncake Router Benchmark",
    "trace-replay": "Trace-Replay-Bench",
    "custom": "Custom",
}
AIPERF_TYPES = ("mooncake-router", "trace-replay", "custom")


class UnknownBenchmarkError(ValueError):
    """srtctl fails this way at run time, after the workers are already up."""


@dataclass(frozen=True)
class BenchmarkPlan:
    type: str
    client_node: str
    public_api_node: str
    runner: str | None
    script_path: str | None
    process: ProcessSpec | None


def _opt(value: Any) -> str:
    return "" if value is None else str(value)


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _concurrencies(value: Any, sep: str) -> str:
    if isinstance(value, list):
        return sep.join(str(v) for v in value)
    return _opt(value)


def _gpu_totals(ctx: BuildContext) -> tuple[int, int, int]:
    r = ctx.config.resources
    if r.is_disaggregated:
        prefill = r.num_prefill * r.prefill_gpus
        decode = r.num_decode * r.decode_gpus
        return prefill + decode, prefill, decode
    return (r.agg_nodes or 1) * r.gpus_per_node, 0, 0


def benchmark_argv(ctx: BuildContext) -> tuple[list[str], str]:
    b = ctx.config.benchmark
    btype = b.type
    name = ctx.served_model_name
    tokenizer = ctx.model_arg
    if btype == "sa-bench":
        total, prefill, decode = _gpu_totals(ctx)
        script = f"{SCRIPTS}/sa-bench/bench.sh"
        argv = ["bash", script, LOCAL_URL, _opt(b.isl), _opt(b.osl)]
        argv += [_concurrencies(b.concurrencies, "x"), _opt(b.req_rate), tokenizer, name]
        argv += [_bool(ctx.config.is_disaggregated), str(total), str(prefill), str(decode)]
        argv += [str(b.random_range_ratio if b.random_range_ratio is not None else 0.8)]
        argv += [str(b.num_prompts_mult if b.num_prompts_mult is not None else 10)]
        argv += [str(b.num_warmup_mult if b.num_warmup_mult is not None else 2)]
        argv += [_opt(b.custom_tokenizer)]
        argv += [_bool(b.use_chat_template if b.use_chat_template is not None else True)]
        argv += [b.dataset_name or "random", _opt(b.dataset_path)]
        argv += [_bool(bool(b.reuse_http))]
        return argv, script
    if btype == "gsm8k":
        if ctx.config.backend_type == "vllm":
            script = f"{SCRIPTS}/gsm8k/vllm-bench.sh"
            argv = ["bash", script, "http://localhost", str(FRONTEND_PUBLIC_PORT), name]
            argv += [str(b.num_examples or 1319), str(b.max_tokens or 256), str(b.num_shots or 5)]
            argv += [str(b.temperature if b.temperature is not None else 0.0), str(b.repeat or 1)]
            return argv, script
        script = f"{SCRIPTS}/gsm8k/sglang-bench.sh"
        argv = ["bash", script, LOCAL_URL, str(b.num_examples or 1319)]
        argv += [str(b.max_tokens or 16384), str(b.num_threads or 512), str(b.num_shots or 5)]
        argv += [_opt(b.temperature), _opt(b.top_p), _opt(b.top_k)]
        return argv, script
    if btype == "gpqa":
        script = f"{SCRIPTS}/gpqa/bench.sh"
        argv = ["bash", script, LOCAL_URL, str(b.num_examples or 198), str(b.max_tokens or 32768)]
        argv += [str(b.repeat or 8), str(b.num_threads or 128)]
        return argv, script
    if btype == "mooncake-router":
        script = f"{SCRIPTS}/mooncake-router/bench.sh"
        argv = ["bash", script, LOCAL_URL, name, b.mooncake_workload or "conversation"]
        argv += [_num(b.ttft_threshold_ms, 2000), _num(b.itl_threshold_ms, 25), tokenizer]
        argv += _aiperf_args(b.aiperf_args)
        return argv, script
    if btype == "trace-replay":
        script = f"{SCRIPTS}/trace-replay/bench.sh"
        argv = ["bash", script, LOCAL_URL, name, _opt(b.trace_file)]
        argv += [_concurrencies(b.concurrencies, ","), _num(b.ttft_threshold_ms, 2000)]
        argv += [_num(b.itl_threshold_ms, 25), tokenizer]
        argv += _aiperf_args(b.aiperf_args)
        return argv, script
    if btype == "custom":
        return ["bash", "-lc", b.command or ""], "<custom command>"
    raise UnknownBenchmarkError(f"Unknown benchmark type: {btype}")


def _num(value: float | None, default: int) -> str:
    if value is None:
        return str(default)
    return str(int(value)) if float(value).is_integer() and isinstance(value, int) else str(value)


def _aiperf_args(args: dict[str, Any] | None) -> list[str]:
    out: list[str] = []
    for key, value in (args or {}).items():
        out += [f"--{key}", str(value)]
    return out


def benchmark_env(ctx: BuildContext) -> EnvBuilder:
    cfg = ctx.config
    b = cfg.benchmark
    ip = ctx.values.ip
    env = EnvBuilder()
    profiling_benchmark_env(ctx, env)
    serving = [p for p in ctx.topology.processes if p.http_port]
    if b.type == "custom":
        groups = (("PREFILL", "prefill"), ("DECODE", "decode"), ("AGG", "agg"))
        for label, role in groups:
            procs = [p for p in serving if p.role == role]
            if procs:
                env.set(f"SRT_{label}_IPS", ",".join(ip(p.node) for p in procs))
                env.set(
                    f"SRT_{label}_ENDPOINTS", ",".join(f"{ip(p.node)}:{p.sys_port}" for p in procs)
                )
    env.set("SRTCTL_FRONTEND_TYPE", ctx.frontend_type)
    env.set("SRT_FRONTEND_HOST", ip(ctx.topology.frontend.public_node))
    env.set("SRT_FRONTEND_PORT", str(ctx.topology.frontend.public_port))
    env.update(cfg.environment, "recipe:environment")
    for key, value in dynamo_wheel_env(ctx).items():
        env.set(key, value, "dynamo.wheel")
    if b.type in AIPERF_TYPES:
        urls = ",".join(f"http://{ip(p.node)}:{p.sys_port}/metrics" for p in serving)
        env.set("AIPERF_SERVER_METRICS_URLS", urls)
        if b.aiperf_package:
            env.set("AIPERF_PACKAGE", b.aiperf_package)
    slow_down = b.slow_down_sleep_time is not None or b.slow_down_wait_time is not None
    if b.type == "sa-bench" and ctx.frontend_type == "sglang" and slow_down:
        leaders = [p for p in ctx.topology.processes if p.is_leader]
        env.set(
            "SA_BENCH_SLOW_DOWN_URLS",
            ",".join(f"http://{ip(p.node)}:{p.http_port}" for p in leaders),
        )
        env.set("SA_BENCH_SLOW_DOWN_SLEEP_TIME", _opt(b.slow_down_sleep_time))
        env.set("SA_BENCH_SLOW_DOWN_WAIT_TIME", _opt(b.slow_down_wait_time))
    if b.type == "custom":
        env.update(b.env, "recipe:benchmark.env")
    return env


def build_benchmark(ctx: BuildContext) -> BenchmarkPlan:
    b = ctx.config.benchmark
    node = ctx.topology.roles.bench
    public = ctx.topology.frontend.public_node
    if b.type == "manual":
        return BenchmarkPlan("manual", node, public, None, None, None)
    if b.type not in REGISTERED:
        raise UnknownBenchmarkError(f"Unknown benchmark type: {b.type}")
    argv, script = benchmark_argv(ctx)
    env = benchmark_env(ctx)
    image = ctx.container
    if b.type == "custom" and b.container_image:
        image = ctx.cluster.resolve_container(b.container_image)
    process = ProcessSpec(
        stage="benchmark",
        name="benchmark",
        nodes=[node],
        argv=argv,
        env=env.env,
        env_sources=env.sources,
        container_image=image,
        container_mounts=ctx.base_mounts(),
        srun=SrunSpec(
            nodelist=[node],
            output=f"{ctx.values.log_dir}/benchmark.out",
            options=dict(ctx.config.srun_options),
        ),
    )
    return BenchmarkPlan(b.type, node, public, RUNNERS.get(b.type), script, process)


def shell_line(argv: list[str]) -> str:
    return shlex.join(argv)
