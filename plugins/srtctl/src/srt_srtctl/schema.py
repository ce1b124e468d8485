"""The srtctl 0.3.0 recipe as pydantic models, as strict as srtctl's own schema.

srtctl rejects unknown keys and non-string environment values at load time (doc §1); a recipe
that srtctl refuses must not run under srt either, or users would meet the error only when they
go back. Every default srtctl applies is declared here, so a loaded `SrtConfig` is the fully
defaulted config (doc §2-§14) and no builder needs to know a default.

The backend section is validated against the model of its `type` (sglang when absent), so that
`trtllm_config` under an sglang backend is an unknown key, as in srtctl.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from srt_srtctl.errors import KeyPath, Problem, RecipeError

EnvMap = dict[str, StrictStr]
ModeConfig = dict[str, Any] | None

BackendType = Literal["sglang", "vllm", "trtllm", "mocker"]
FrontendType = Literal["dynamo", "sglang", "trtllm_serve", "vllm"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSection(_Strict):
    path: StrictStr
    container: StrictStr
    precision: StrictStr
    stage_dir: StrictStr | None = None


class ResourcesSection(_Strict):
    gpu_type: StrictStr
    gpus_per_node: int = 4
    prefill_nodes: int | None = None
    decode_nodes: int | None = None
    prefill_workers: int | None = None
    decode_workers: int | None = None
    agg_nodes: int | None = None
    agg_workers: int | None = None
    gpus_per_prefill: int | None = None
    gpus_per_decode: int | None = None
    gpus_per_agg: int | None = None
    spread_workers: bool = False

    @property
    def is_disaggregated(self) -> bool:
        """srtctl's rule: disaggregated as soon as either P or D node count is given (doc §4)."""
        return self.prefill_nodes is not None or self.decode_nodes is not None

    @property
    def num_prefill(self) -> int:
        return (self.prefill_workers or 0) if self.is_disaggregated else 0

    @property
    def num_decode(self) -> int:
        return (self.decode_workers or 0) if self.is_disaggregated else 0

    @property
    def num_agg(self) -> int:
        if self.is_disaggregated:
            return 0
        return self.agg_workers if self.agg_workers is not None else 1

    def _per_worker(self, explicit: int | None, nodes: int | None, workers: int | None) -> int:
        if explicit is not None:
            return explicit
        if nodes and workers:
            return (nodes * self.gpus_per_node) // workers
        return self.gpus_per_node

    @property
    def prefill_gpus(self) -> int:
        return self._per_worker(self.gpus_per_prefill, self.prefill_nodes, self.prefill_workers)

    @property
    def decode_gpus(self) -> int:
        if self.gpus_per_decode is None and self.decode_nodes == 0 and self.decode_workers:
            # decode_nodes: 0 means decode shares the prefill nodes with the prefill GPU count
            return self.prefill_gpus
        return self._per_worker(self.gpus_per_decode, self.decode_nodes, self.decode_workers)

    @property
    def agg_gpus(self) -> int:
        return self._per_worker(self.gpus_per_agg, self.agg_nodes, self.agg_workers)


class SlurmSection(_Strict):
    account: StrictStr | None = None
    partition: StrictStr | None = None
    time_limit: StrictStr | None = None


class ModeConfigs(_Strict):
    prefill: ModeConfig = None
    decode: ModeConfig = None
    aggregated: ModeConfig = None


class ModeSteps(_Strict):
    start_step: int | None = None
    stop_step: int | None = None


class MooncakeKVStore(_Strict):
    container: StrictStr | None = None
    env: EnvMap = Field(default_factory=dict)
    master_extra_args: list[str] | dict[str, Any] | StrictStr | None = None
    store_config: dict[str, Any] | None = None


class _BackendCommon(_Strict):
    prefill_environment: EnvMap = Field(default_factory=dict)
    decode_environment: EnvMap = Field(default_factory=dict)
    aggregated_environment: EnvMap = Field(default_factory=dict)

    def environment_for(self, mode: str) -> dict[str, str]:
        if mode == "prefill":
            return dict(self.prefill_environment)
        if mode == "decode":
            return dict(self.decode_environment)
        return dict(self.aggregated_environment)


class SGLangBackend(_BackendCommon):
    type: Literal["sglang"] = "sglang"
    sglang_config: ModeConfigs = Field(default_factory=ModeConfigs)
    kv_events_config: bool | dict[str, Any] | None = None
    mooncake_kv_store: MooncakeKVStore | None = None
    het_jobs: bool = False


class VLLMBackend(_BackendCommon):
    type: Literal["vllm"] = "vllm"
    vllm_config: ModeConfigs = Field(default_factory=ModeConfigs)
    connector: StrictStr | None = "nixl"
    kv_events_config: bool | dict[str, Any] | None = None
    mooncake_kv_store: MooncakeKVStore | None = None
    dp_launch_mode: Literal["per_node", "per_gpu"] = "per_node"
    allow_prefill_decode_colocation: bool = False
    allow_prefill_decode_colocation_across_nodes: bool = False
    set_cuda_visible_devices: bool = False


class TRTLLMBackend(_BackendCommon):
    type: Literal["trtllm"] = "trtllm"
    trtllm_config: ModeConfigs = Field(default_factory=ModeConfigs)
    numa_memory_bind: bool | None = None
    sequential_node_start: int | None = None


class MockerBackend(_BackendCommon):
    type: Literal["mocker"] = "mocker"
    mocker_config: ModeConfigs = Field(default_factory=ModeConfigs)
    engine_type: StrictStr = "vllm"
    speedup_ratio: float = 100.0
    decode_speedup_ratio: float = 1.0
    data_parallel_size: int = 1
    num_gpu_blocks_override: int = 16384
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    block_size: int | None = None
    num_workers: int = 1
    startup_time: float | None = None
    kv_transfer_bandwidth: float | None = None
    kv_cache_dtype: StrictStr | None = None
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    preemption_mode: StrictStr | None = None


Backend = SGLangBackend | VLLMBackend | TRTLLMBackend | MockerBackend
BACKEND_MODELS: dict[str, type[_BackendCommon]] = {
    "sglang": SGLangBackend,
    "vllm": VLLMBackend,
    "trtllm": TRTLLMBackend,
    "mocker": MockerBackend,
}


class FrontendSection(_Strict):
    type: FrontendType = "dynamo"
    enable_multiple_frontends: bool = True
    num_additional_frontends: int = 9
    args: dict[str, Any] | None = None
    env: EnvMap = Field(default_factory=dict)
    nginx_container: StrictStr = "nginx:1.27.4"
    nginx_raise_ulimit: bool | None = None
    nginx_session_affinity_header: StrictStr | None = None
    nginx_keepalive_timeout: StrictStr = "600s"
    orchestrator_placement: StrictStr | None = None
    dedicated_node: bool = False


class DynamoSection(_Strict):
    version: StrictStr | None = "0.8.0"
    hash: StrictStr | None = None
    top_of_tree: bool = False
    wheel: StrictStr | None = None
    install: bool = True
    request_plane: Literal["nats", "tcp", "http"] = "tcp"
    event_plane: Literal["nats", "zmq"] | None = None
    cargo_patches: list[Any] | dict[str, Any] | None = None


class InfraSection(_Strict):
    etcd_nats_dedicated_node: bool = False
    nats_max_payload_mb: int | None = None


class BenchmarkSection(_Strict):
    type: StrictStr = "manual"
    isl: int | None = None
    osl: int | None = None
    concurrencies: list[int] | StrictStr | int | None = None
    req_rate: StrictStr | int | float = "inf"
    random_range_ratio: float | None = None
    num_prompts_mult: int | None = None
    num_warmup_mult: int | None = None
    custom_tokenizer: StrictStr | None = None
    use_chat_template: bool | None = None
    dataset_name: StrictStr | None = None
    dataset_path: StrictStr | None = None
    reuse_http: bool | None = None
    num_examples: int | None = None
    max_tokens: int | None = None
    num_threads: int | None = None
    num_shots: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    repeat: int | None = None
    mooncake_workload: StrictStr | None = None
    ttft_threshold_ms: int | float | None = None
    itl_threshold_ms: int | float | None = None
    aiperf_args: dict[str, Any] | None = None
    aiperf_package: StrictStr | None = None
    trace_file: StrictStr | None = None
    command: StrictStr | None = None
    container_image: StrictStr | None = None
    env: EnvMap = Field(default_factory=dict)
    slow_down_sleep_time: float | None = None
    slow_down_wait_time: float | None = None
    colocate_with_frontend: bool = True
    client_dedicated_node: bool = False
    client_placement: StrictStr | None = None
    sweep: dict[str, Any] | None = None


class HealthCheckSection(_Strict):
    max_attempts: int = 180
    interval_seconds: int = 10


class ProfilingSection(_Strict):
    type: Literal["none", "nsys", "nsys-time", "torch"] = "none"
    prefill: ModeSteps | None = None
    decode: ModeSteps | None = None
    aggregated: ModeSteps | None = None
    nsys_extra_args: list[str] | StrictStr | None = None


class TachometerSection(_Strict):
    enabled: bool = False
    sync_interval: int | None = None
    container: StrictStr | None = None


class ObservabilitySection(_Strict):
    enabled: bool = False
    scrape_metrics: bool = True
    enable_otel: bool = False
    otel_endpoint: StrictStr | None = None
    tachometer: TachometerSection = Field(default_factory=TachometerSection)


class IdentitySection(_Strict):
    model: dict[str, Any] | None = None
    container: dict[str, Any] | None = None
    frameworks: dict[str, Any] | None = None


class SrtConfig(_Strict):
    """One fully defaulted srtctl job (a plain recipe, or one variant of an override file)."""

    name: StrictStr
    model: ModelSection
    resources: ResourcesSection
    slurm: SlurmSection = Field(default_factory=SlurmSection)
    backend: Backend = Field(default_factory=SGLangBackend)
    frontend: FrontendSection = Field(default_factory=FrontendSection)
    dynamo: DynamoSection = Field(default_factory=DynamoSection)
    infra: InfraSection = Field(default_factory=InfraSection)
    benchmark: BenchmarkSection = Field(default_factory=BenchmarkSection)
    health_check: HealthCheckSection = Field(default_factory=HealthCheckSection)
    profiling: ProfilingSection = Field(default_factory=ProfilingSection)
    observability: ObservabilitySection = Field(default_factory=ObservabilitySection)
    identity: IdentitySection | None = None
    sbatch_directives: EnvMap = Field(default_factory=dict)
    srun_options: dict[str, StrictStr | None] = Field(default_factory=dict)
    environment: EnvMap = Field(default_factory=dict)
    setup_script: StrictStr | None = None
    extra_mount: list[StrictStr] | None = None
    container_mounts: dict[str, StrictStr] | None = None
    enable_config_dump: StrictBool = True
    het_jobs: StrictBool | None = None
    reporting: dict[str, Any] | None = None
    telemetry: dict[str, Any] | None = None
    output: dict[str, Any] | None = None

    @property
    def backend_type(self) -> str:
        return self.backend.type

    @property
    def is_disaggregated(self) -> bool:
        return self.resources.is_disaggregated


_FIELD_MESSAGES = {
    "extra_forbidden": "Unknown field.",
    "string_type": "Not a valid string.",
    "missing": "Missing data for required field.",
}


def _problems_from(exc: ValidationError, prefix: KeyPath = ()) -> list[Problem]:
    problems = []
    for err in exc.errors():
        loc = tuple(part for part in err["loc"] if part not in BACKEND_MODELS or False)
        message = _FIELD_MESSAGES.get(err["type"], err["msg"])
        problems.append(Problem(prefix + loc, message))
    return problems


def validate_config(data: Mapping[str, Any]) -> SrtConfig:
    """Load a plain (already expanded) recipe dict, reporting every problem with its key path."""
    if not isinstance(data, Mapping):
        raise RecipeError([Problem((), "a recipe must be a mapping")])
    body = {k: v for k, v in data.items() if k != "lock"}
    problems: list[Problem] = []
    backend_raw = body.pop("backend", None)
    backend: _BackendCommon | None = None
    if backend_raw is None:
        backend = SGLangBackend()
    elif not isinstance(backend_raw, Mapping):
        problems.append(Problem(("backend",), "Not a valid mapping."))
    else:
        btype = backend_raw.get("type") or "sglang"
        model = BACKEND_MODELS.get(str(btype))
        if model is None:
            problems.append(
                Problem(("backend", "type"), f"Must be one of: {', '.join(BACKEND_MODELS)}.")
            )
        else:
            try:
                backend = model.model_validate({**backend_raw, "type": btype})
            except ValidationError as exc:
                problems.extend(_problems_from(exc, ("backend",)))
    try:
        config = SrtConfig.model_validate(body)
    except ValidationError as exc:
        problems.extend(_problems_from(exc))
        config = None
    problems.extend(_semantic_problems(body, backend))
    if problems or config is None or backend is None:
        raise RecipeError(problems)
    return config.model_copy(update={"backend": backend})


def _semantic_problems(body: Mapping[str, Any], backend: _BackendCommon | None) -> list[Problem]:
    """Cross-field rules srtctl enforces at load time (doc §6-§8)."""
    return [
        *_frontend_problems(body),
        *_dynamo_problems(body),
        *_mooncake_problems(body, backend),
        *_profiling_problems(body, backend),
    ]


def _frontend_problems(body: Mapping[str, Any]) -> list[Problem]:
    frontend = body.get("frontend") or {}
    if not isinstance(frontend, Mapping):
        return []
    ftype = frontend.get("type", "dynamo")
    if ftype in ("trtllm_serve", "vllm") and frontend.get("enable_multiple_frontends", True):
        return [
            Problem(
                ("frontend", "enable_multiple_frontends"),
                f"frontend.type {ftype} cannot be combined with enable_multiple_frontends: true",
            )
        ]
    return []


def _dynamo_problems(body: Mapping[str, Any]) -> list[Problem]:
    dynamo = body.get("dynamo") or {}
    if not isinstance(dynamo, Mapping):
        return []
    sources = [k for k in ("hash", "top_of_tree", "wheel") if dynamo.get(k)]
    if len(sources) > 1:
        return [Problem(("dynamo",), f"only one of hash, top_of_tree, wheel may be set: {sources}")]
    return []


def _mooncake_problems(body: Mapping[str, Any], backend: _BackendCommon | None) -> list[Problem]:
    if not isinstance(backend, SGLangBackend) or backend.mooncake_kv_store is None:
        return []
    resources = body.get("resources") or {}
    disagg = isinstance(resources, Mapping) and (
        resources.get("prefill_nodes") is not None or resources.get("decode_nodes") is not None
    )
    modes = (backend.sglang_config.prefill or {}, backend.sglang_config.decode or {})
    if disagg and not any(m.get("disaggregation-transfer-backend") == "mooncake" for m in modes):
        return [
            Problem(
                ("backend", "mooncake_kv_store"),
                "mooncake_kv_store is set but neither prefill nor decode uses "
                "disaggregation-transfer-backend: mooncake",
            )
        ]
    return []


def _profiling_problems(body: Mapping[str, Any], backend: _BackendCommon | None) -> list[Problem]:
    profiling = body.get("profiling") or {}
    if not isinstance(profiling, Mapping):
        return []
    if isinstance(backend, TRTLLMBackend) and profiling.get("type") == "torch":
        return [Problem(("profiling", "type"), "torch profiling is not supported for trtllm")]
    return []
