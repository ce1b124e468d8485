"""The environment of the processes the engine builds, and the interpreter they run under.

srtctl exports its variables first and the recipe's after, so a recipe may override most of
them; srt keeps that order (the engine's ``env``, then the recipe's). What the engine must
own because something else depends on it (the system port its readiness probe knocks on, a
port from a formula another process is told) goes in ``forced_env`` instead.
"""

from __future__ import annotations

from srt_services.extend import Recipe

from srt_dynamo.install import wheel_env
from srt_dynamo.options import DynamoOptions, ModeSteps

#: srtctl's worker log filter (a worker logs every request at info otherwise).
DEFAULT_DYN_LOG = "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn"
#: Short mode names in file names and variables (``PROFILE_AGG_START_STEP``).
SHORT = {"prefill": "prefill", "decode": "decode", "aggregated": "agg"}
#: What a worker's system server must report before its ``/health`` says ready.
HEALTH_ENDPOINTS = '["generate"]'


def interpreter(options: DynamoOptions, container: str | None) -> str:
    """The recipe's choice, else the container's ``python3``, else srt's own interpreter
    (``{python}``, rendered by srt): a venv with srt and Dynamo works unactivated."""
    if options.python:
        return options.python
    return "python3" if container else "{python}"


def private_dirs(options: DynamoOptions) -> dict[str, str]:
    """HOME, TMPDIR and the caches inside the instance's node-local directory: Dynamo leaves
    a logging config in ``$TMPDIR`` per start and caches model cards under ``$HOME/.cache``
    (HOME must be absolute, which ``{local_dir}`` is)."""
    if not options.isolate_home:
        return {}
    return {
        "HOME": "{local_dir}",
        "TMPDIR": "{local_dir}",
        "XDG_CACHE_HOME": "{local_dir}/.cache",
    }


def common_env(recipe: Recipe, options: DynamoOptions, service_name: str) -> dict[str, str]:
    """What srtctl gives every Dynamo process, the frontend included."""
    env = {"DYN_SKIP_SGLANG_LOG_FORMATTING": "1"}
    if options.otel_endpoint:
        env.update(
            DYN_LOGGING_JSONL="true",
            OTEL_EXPORT_ENABLED="true",
            OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=options.otel_endpoint,
            OTEL_SERVICE_NAME=f"dynamo-{service_name}",
        )
    if options.install is not False:
        env.update(wheel_env(options.install))
    env.update(private_dirs(options))
    return env


def worker_env(recipe: Recipe, options: DynamoOptions, mode: str) -> dict[str, str]:
    """A worker's own variables: where it advertises itself, how its health is judged."""
    env = {
        "HEAD_NODE_IP": "{head_ip}",
        **common_env(recipe, options, SHORT[mode]),
        # bind and advertise the node's own address: Dynamo otherwise advertises the
        # machine's first external one, wrong on a virtual node and on multi-homed hosts
        "DYN_SYSTEM_HOST": "{node_ip}",
        "DYN_TCP_RPC_HOST": "{node_ip}",
        "DYN_EVENT_PLANE_HOST": "{node_ip}",
        "DYN_HTTP_RPC_HOST": "{node_ip}",
        "DYN_LOG": DEFAULT_DYN_LOG,
    }
    if options.health == "endpoint":
        env["DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS"] = HEALTH_ENDPOINTS
    else:
        env["DYN_HEALTH_CHECK_ENABLED"] = "true"
    return env


def frontend_env(recipe: Recipe, options: DynamoOptions) -> dict[str, str]:
    return {
        **common_env(recipe, options, "frontend"),
        # the response-stream listener opens on the first model; it advertises this address
        "DYN_TCP_RESPONSE_STREAM_HOST": "{node_ip}",
        "DYN_EVENT_PLANE_HOST": "{node_ip}",
    }


def _steps(options: DynamoOptions, mode: str) -> ModeSteps | None:
    prof = options.profiling
    if prof is None:
        return None
    found: ModeSteps | None = getattr(prof, mode)
    return found


def profiling_env(options: DynamoOptions, mode: str) -> dict[str, str]:
    """srtctl's profiling variables (layered over the recipe's, as srtctl does)."""
    prof = options.profiling
    if prof is None:
        return {}
    short = SHORT[mode]
    env = {"PROFILING_MODE": short, "PROFILE_TYPE": prof.type}
    steps = _steps(options, mode)
    if steps is not None:
        if steps.start_step is not None:
            env[f"PROFILE_{short.upper()}_START_STEP"] = str(steps.start_step)
        if steps.stop_step is not None:
            env[f"PROFILE_{short.upper()}_STOP_STEP"] = str(steps.stop_step)
    if prof.type == "torch":
        env["SGLANG_TORCH_PROFILER_DIR"] = "{log_dir}/profiles/" + short
    if prof.type.startswith("nsys") and steps is not None and steps.start_step is not None:
        env["TLLM_PROFILE_START_STOP"] = f"{steps.start_step}-{steps.stop_step}"
        env["TLLM_LLMAPI_ENABLE_NVTX"] = "1"
    return env


def nsys_prefix(
    options: DynamoOptions, mode: str, name: str, gpus: str, *, trtllm: bool, dynamo: bool
) -> list[str]:
    """``nsys profile ...`` before the worker's command, as srtctl writes it (the report
    goes to the job's log directory, the path the process sees)."""
    prof = options.profiling
    if prof is None or not prof.type.startswith("nsys"):
        return []
    short = SHORT[mode]
    argv = ["nsys", "profile", "-t", "cuda,nvtx,ucx" if trtllm else "cuda,nvtx"]
    argv += ["--cuda-graph-trace=node", "-c", "cudaProfilerApi", "--capture-range-end", "stop"]
    argv += ["--force-overwrite", "true"]
    extra = prof.nsys_extra_args
    if extra:
        argv += extra.split() if isinstance(extra, str) else list(extra)
    if trtllm:
        argv += ["--kill", "none", "--wait", "all"]
    if dynamo:
        argv.append("--trace-fork-before-exec=true")
    argv += ["-o", f"{{log_dir}}/profiles/{short}/{name}_profile_gpu{gpus}"]
    return argv
