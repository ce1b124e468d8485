"""``engine.options`` of the ``dynamo`` engine: every setting srtctl reads outside the backend's
own ``*_config`` (which is ``roles.<role>.config`` here), with srtctl's defaults.

Each model is closed (an unknown key is an error naming the engine) and every field carries
its description, which the README repeats: a recipe author should never have to read this
module to learn what a setting does.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator
from srt_services.extend import KindOptions, Port

#: srtctl's mode names, the keys of per-mode settings (``kv_events``, ``profiling``).
MODES: tuple[str, ...] = ("prefill", "decode", "aggregated")
#: A role's mode: ``agg`` workers run the ``aggregated`` settings.
MODE_OF_ROLE: dict[str, str] = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}

#: Dynamo 1.6 parses DYN_SYSTEM_PORT as an i16 and exits on a larger port.
MAX_SYSTEM_PORT = 32767

PositiveInt = Annotated[int, Field(ge=1)]
NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class InstallOptions(KindOptions):
    """Install Dynamo in the job's container before each Dynamo process starts (srtctl's
    ``dynamo.install``); exactly one source."""

    version: str | None = Field(
        None,
        description="`pip install ai-dynamo-runtime==V ai-dynamo==V` from NVIDIA's index"
        " (srtctl's default source, 0.8.0, when no other is given).",
    )
    wheel: str | None = Field(
        None,
        description="A prebuilt ai-dynamo wheel of this version, installed by srtctl's"
        " `dynamo_wheels.py` (sets DYNAMO_WHEEL_NAME and DYNAMO_VERSION).",
    )
    hash: str | None = Field(
        None,
        description="Build ai-dynamo at this git commit (cached under /configs/dynamo-wheels).",
    )
    top_of_tree: bool = Field(False, description="Build ai-dynamo at the head of its repository.")

    @model_validator(mode="after")
    def _one_source(self) -> InstallOptions:
        given = [n for n in ("version", "wheel", "hash") if getattr(self, n) is not None] + (
            ["top_of_tree"] if self.top_of_tree else []
        )
        if len(given) > 1:
            raise ValueError(f"give one install source, not {' and '.join(given)}")
        return self


class MockerOptions(KindOptions):
    """The mocker's knobs (srtctl's ``backend.*`` for ``type: mocker``). The first six are
    always passed, the rest only when moved off their default, as srtctl does."""

    engine_type: Literal["vllm", "sglang"] = Field(
        "vllm", description="Which engine's scheduler the mocker simulates (`--engine-type`)."
    )
    speedup_ratio: NonNegative = Field(
        100.0, description="Simulated time runs this much faster (`--speedup-ratio`; 0: no delay)."
    )
    decode_speedup_ratio: NonNegative = Field(
        1.0, description="Extra speed-up of decode steps (`--decode-speedup-ratio`)."
    )
    data_parallel_size: PositiveInt = Field(
        1, description="Simulated data-parallel ranks (`--data-parallel-size`)."
    )
    num_gpu_blocks_override: PositiveInt = Field(
        16384, description="KV-cache blocks per rank (`--num-gpu-blocks-override`)."
    )
    max_num_seqs: PositiveInt = Field(256, description="`--max-num-seqs`.")
    max_num_batched_tokens: PositiveInt = Field(8192, description="`--max-num-batched-tokens`.")
    block_size: PositiveInt | None = Field(None, description="`--block-size`.")
    num_workers: PositiveInt = Field(
        1, description="Mocker instances in one process (`--num-workers`, when above 1)."
    )
    startup_time: NonNegative | None = Field(
        None, description="Simulated engine start-up, seconds (`--startup-time`)."
    )
    kv_transfer_bandwidth: NonNegative | None = Field(
        None, description="Simulated KV transfer bandwidth, GB/s (`--kv-transfer-bandwidth`)."
    )
    kv_cache_dtype: str | None = Field(None, description="`--kv-cache-dtype`.")
    enable_prefix_caching: bool = Field(
        True, description="`false` passes `--no-enable-prefix-caching`."
    )
    enable_chunked_prefill: bool = Field(
        True, description="`false` passes `--no-enable-chunked-prefill`."
    )
    preemption_mode: str | None = Field(None, description="`--preemption-mode`.")
    model_name_flag: bool = Field(
        True,
        description="Pass `--model-name <served name>`, so the name clients ask for is the one"
        " the frontend's readiness probe waits for (srtctl passes none and the mocker derives"
        " one from the model path).",
    )


class ModeSteps(KindOptions):
    start_step: Annotated[int, Field(ge=0)] | None = Field(None, description="First step profiled.")
    stop_step: Annotated[int, Field(ge=0)] | None = Field(None, description="Last step profiled.")


class ProfilingOptions(KindOptions):
    """srtctl's ``profiling``: nsys wraps each worker, torch profiles through SGLang."""

    type: Literal["nsys", "nsys-time", "torch"] = Field(description="The profiler.")
    prefill: ModeSteps | None = Field(None, description="Steps profiled on prefill workers.")
    decode: ModeSteps | None = Field(None, description="Steps profiled on decode workers.")
    aggregated: ModeSteps | None = Field(None, description="Steps profiled on agg workers.")
    nsys_extra_args: str | list[str] | None = Field(
        None, description="More `nsys profile` arguments (a string is split on blanks)."
    )


class PortBases(KindOptions):
    """srtctl's fixed port formulas (k: the process's position among every worker process
    of the job, s: the leader's slot on its node). Move a base only to run two jobs on one
    machine (local mode) or around a port the site reserves."""

    system: Annotated[int, Field(ge=1, le=MAX_SYSTEM_PORT)] = Field(
        7500,
        description="`DYN_SYSTEM_PORT` = system + k (health, metrics). Dynamo 1.6 reads it as"
        " a signed 16-bit number: at most 32767.",
    )
    http: Port = Field(6100, description="sglang `--port` = http + 32*s (leaders).")
    bootstrap: Port = Field(
        7200, description="Prefill bootstrap = bootstrap + (prefill leaders before it on its host)."
    )
    kv_events: Port = Field(5200, description="KV-events publisher = kv_events + k.")
    nixl: Port = Field(5400, description="`VLLM_NIXL_SIDE_CHANNEL_PORT` = nixl + k.")
    nccl: Port = Field(17500, description="sglang `--nccl-port` = nccl + k.")
    dist_init: Port = Field(8300, description="`--dist-init-addr <leader ip>:dist_init`.")
    vllm: Port = Field(20000, description="`VLLM_PORT` = vllm + 50*k.")
    dp_rpc: Port = Field(8400, description="vLLM `--data-parallel-rpc-port` = dp_rpc + slot.")


KvEvents = bool | dict[str, Any]


class DynamoOptions(KindOptions):
    """Settings of the ``dynamo`` engine (``engine.options``)."""

    python: str | None = Field(
        None,
        description="The interpreter that runs `-m dynamo.*`. Default: `python3` inside a"
        " container (`container` of the role or the job), else the interpreter srt runs"
        " under (`{python}`), so a venv holding srt and Dynamo works without activating it.",
    )
    install: Literal[False] | InstallOptions = Field(
        False,
        description="Install Dynamo before each Dynamo process (a preamble, once per"
        " container, behind a lock): `{version: 0.8.0}`, `{wheel: ..}`, `{hash: ..}`,"
        " `{top_of_tree: true}`. Default `false`: Dynamo is already there.",
    )
    kv_events: bool | dict[Literal["prefill", "decode", "aggregated"], KvEvents] = Field(
        False,
        description="sglang/vllm `--kv-events-config` on a ZMQ publisher at kv_events + k:"
        " `true` for every mode, or per mode `{prefill: true, decode: {topic: x}}` (a mapping"
        " is merged into the generated config).",
    )
    connector: str | None = Field(
        "nixl",
        description="vLLM's KV connector when the role and `engine.connector` name none:"
        " `nixl`, `lmcache`, `kvbm`, any other text passed verbatim as `--kv-transfer-config`,"
        " or `null`/`none` for no flag. A role's `config.connector` wins for its workers.",
    )
    dp_launch_mode: Literal["per_node", "per_gpu"] = Field(
        "per_node",
        description="vLLM data parallel (`data-parallel-size` in a role's config): one process"
        " per node running its local ranks (`per_node`), or srtctl's deprecated `per_gpu`.",
    )
    set_cuda_visible_devices: bool = Field(
        False,
        description="vLLM: give a worker its GPUs by `CUDA_VISIBLE_DEVICES` instead of"
        " `--device-ids`.",
    )
    gpu_type: str | None = Field(
        None,
        description="The nodes' GPU model (srtctl's `resources.gpu_type`); `gb200`/`gb300`"
        " turn on `numactl -m 0,1` for disaggregated trtllm workers.",
    )
    numa_memory_bind: bool | None = Field(
        None,
        description="trtllm: `numactl -m 0,1` before the worker (`null`: by `gpu_type`).",
    )
    sequential_node_start: PositiveInt | None = Field(
        None,
        description="trtllm: workers that share a leader node start this many at a time; each"
        " later one waits in its preamble until the earlier ones answer `/health`.",
    )
    publish_events_and_metrics: bool = Field(
        False,
        description="trtllm (srtctl's `observability.enabled`): `--publish-events-and-metrics`"
        " and `enable_iter_perf_stats`/`return_perf_metrics` in the engine YAML.",
    )
    mocker: MockerOptions = Field(
        default_factory=MockerOptions, description="The mocker's knobs (`engine.type: mocker`)."
    )
    profiling: ProfilingOptions | None = Field(None, description="nsys or torch profiling.")
    dump_config: bool = Field(
        True,
        description="sglang/vllm: `--dump-config-to {log_dir}/<node>_<mode>_w<index>_config.json`.",
    )
    otel_endpoint: str | None = Field(
        None,
        description="Send traces to this OTLP endpoint (`OTEL_EXPORT_ENABLED`,"
        " `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, JSONL logs).",
    )
    request_plane_flag: bool = Field(
        True,
        description="Also pass `--request-plane` to sglang/vllm/trtllm workers (srtctl does;"
        " `DYN_REQUEST_PLANE` is set either way).",
    )
    health: Literal["endpoint", "canary"] = Field(
        "endpoint",
        description="What makes a worker's `/health` say ready: its `generate` endpoint"
        " (`DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS`), or Dynamo's canary requests"
        " (`DYN_HEALTH_CHECK_ENABLED`).",
    )
    isolate_home: bool = Field(
        True,
        description="`HOME`, `TMPDIR` and `XDG_CACHE_HOME` of every process this engine builds"
        " inside its node-local `{local_dir}` (removed with the job): Dynamo leaves a temp file"
        " per start and caches model cards under `~/.cache/dynamo`. `false` keeps the caller's.",
    )
    ports: PortBases = Field(default_factory=PortBases, description="Port formula bases.")
    readiness_timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        1800.0,
        description="How long a worker and the frontend may take to become ready when the"
        " recipe writes no probe (srtctl: health_check max_attempts x interval).",
    )
