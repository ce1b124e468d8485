"""One srtctl variant as the schema-2 document srt plans (/work/notes/srtctl-mapping.md).

The format builds no process: it says, in srt's terms, what srtctl's recipe asks for (roles,
workers, GPUs, the engine's settings, environment, frontend, benchmark, services), and the
engine plugins (srt-dynamo, srt-direct) build the argv from that, as srtctl would. Keeping
the translation a plain document is what lets ``srt migrate --from srtctl`` write it down
and every later check report at a line of the original file.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from srt_services.extend import config_value

from srt_srtctl.cluster import ClusterConfig
from srt_srtctl.errors import KeyPath
from srt_srtctl.schema import (
    MockerBackend,
    MooncakeKVStore,
    SGLangBackend,
    SrtConfig,
    TRTLLMBackend,
    VLLMBackend,
)
from srt_srtctl.topology import frontend_count

HF_PREFIX = "hf:"
CONTAINER_MODEL_PATH = "/model"
MODES = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
FRONTEND_TYPES = {
    "dynamo": "dynamo",
    "sglang": "sglang",
    "vllm": "vllm",
    "trtllm_serve": "trtllm-serve",
}
#: srtctl benchmark types and the srt benchmark plugin that runs each (`custom` is a command).
BENCHMARK_TYPES = {
    "sa-bench": "sa-bench",
    "gsm8k": "gsm8k",
    "gpqa": "gpqa",
    "mooncake-router": "mooncake-router",
    "trace-replay": "trace-replay",
    "router": "router",
    "mmlu": "mmlu",
    "longbenchv2": "longbenchv2",
    "sglang-bench": "sglang-bench",
    "lm-eval": "lm-eval",
    "custom": "command",
    "manual": "manual",
}
#: Benchmark keys that are placement or process settings, not the benchmark plugin's options.
BENCHMARK_NOT_OPTIONS = frozenset(
    {
        "type",
        "env",
        "client_dedicated_node",
        "colocate_with_frontend",
        "client_placement",
        "container_image",
        "command",
    }
)
MOCKER_KEYS = (
    "engine_type",
    "speedup_ratio",
    "decode_speedup_ratio",
    "data_parallel_size",
    "num_gpu_blocks_override",
    "max_num_seqs",
    "max_num_batched_tokens",
    "block_size",
    "num_workers",
    "startup_time",
    "kv_transfer_bandwidth",
    "kv_cache_dtype",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "preemption_mode",
)

#: ``engine.options`` keys -> the srtctl key each comes from.
OPTION_ORIGINS: dict[str, KeyPath] = {
    "install": ("dynamo",),
    "gpu_type": ("resources", "gpu_type"),
    "dump_config": ("enable_config_dump",),
    "profiling": ("profiling",),
    "otel_endpoint": ("observability", "otel_endpoint"),
    "kv_events": ("backend", "kv_events_config"),
    "connector": ("backend", "connector"),
    "dp_launch_mode": ("backend", "dp_launch_mode"),
    "set_cuda_visible_devices": ("backend", "set_cuda_visible_devices"),
    "numa_memory_bind": ("backend", "numa_memory_bind"),
    "sequential_node_start": ("backend", "sequential_node_start"),
    "publish_events_and_metrics": ("observability", "enabled"),
    "readiness_timeout_seconds": ("health_check",),
}

#: schema-2 path prefix -> the srtctl key it comes from (the longest prefix wins).
Origins = dict[KeyPath, KeyPath]


def setup_script_line(name: str) -> str:
    """srtctl's setup-script shell: /configs/<name>, else /configs/patches/<name>."""
    return (
        f"if [ -f /configs/{name} ]; then bash /configs/{name};"
        f" elif [ -f /configs/patches/{name} ]; then bash /configs/patches/{name};"
        f" else echo 'WARNING: /configs/{name} or /configs/patches/{name} not found'; fi"
    )


def model_argument(config: SrtConfig) -> str:
    path = config.model.path
    return path[len(HF_PREFIX) :] if path.startswith(HF_PREFIX) else CONTAINER_MODEL_PATH


def _mode_config(config: SrtConfig, mode: str) -> dict[str, Any]:
    backend = config.backend
    section = getattr(backend, f"{backend.type}_config", None)
    if section is None:
        return {}
    return dict(getattr(section, mode) or {})


def served_model_name(config: SrtConfig) -> str:
    """srtctl's rule: the first served-model-name of prefill, aggregated, decode (sglang,
    vllm), else the model's last path part."""
    if config.backend_type in ("sglang", "vllm"):
        for mode in ("prefill", "aggregated", "decode"):
            name = config_value(_mode_config(config, mode), "served-model-name")
            if name:
                return str(name)
    path = config.model.path
    if path.startswith(HF_PREFIX):
        path = path[len(HF_PREFIX) :]
    return posixpath.basename(path.rstrip("/")) or path


def container_image(config: SrtConfig) -> str:
    image = config.model.container
    if image.startswith(("/", "./")):
        return image
    while "//" in image:  # srtctl round-trips the image through pathlib.Path
        image = image.replace("//", "/")
    return image


def mounts(config: SrtConfig, cluster: ClusterConfig) -> list[str]:
    """host:container pairs: the model at /model, the cluster's default mounts, the recipe's."""
    out: list[str] = []
    if not config.model.path.startswith(HF_PREFIX):
        out.append(f"{config.model.path}:{CONTAINER_MODEL_PATH}")
    out += [f"{host}:{container}" for host, container in cluster.default_mounts.items()]
    for entry in config.extra_mount or []:
        host, _, container = entry.partition(":")
        out.append(f"{host}:{container or host}")
    out += [f"{host}:{container}" for container, host in (config.container_mounts or {}).items()]
    return out


def _roles(config: SrtConfig, cluster: ClusterConfig, origins: Origins) -> dict[str, Any]:
    r = config.resources
    counts = {"prefill": r.num_prefill, "decode": r.num_decode, "agg": r.num_agg}
    gpus = {"prefill": r.prefill_gpus, "decode": r.decode_gpus, "agg": r.agg_gpus}
    nodes = {"prefill": r.prefill_nodes, "decode": r.decode_nodes, "agg": r.agg_nodes}
    source = {"prefill": "prefill", "decode": "decode", "agg": "agg"}
    preamble = _preamble(config, cluster)
    roles: dict[str, Any] = {}
    for role, count in counts.items():
        if not count:
            continue
        mode = MODES[role]
        body: dict[str, Any] = {"workers": count, "gpus_per_worker": gpus[role]}
        if nodes[role]:
            body["nodes"] = nodes[role]
            origins[("roles", role, "nodes")] = ("resources", f"{source[role]}_nodes")
        kv = mooncake_store(config)
        env = {
            **config.backend.environment_for(mode),
            **config.environment,
            **(kv.env if kv is not None else {}),
        }
        if env:
            body["env"] = env
            origins[("roles", role, "env")] = ("backend", f"{mode}_environment")
        cfg = _mode_config(config, mode)
        if cfg:
            body["config"] = cfg
            origins[("roles", role, "config")] = ("backend", f"{config.backend_type}_config", mode)
        if preamble:
            body["preamble"] = preamble
            origins[("roles", role, "preamble")] = ("setup_script",)
        origins[("roles", role, "workers")] = ("resources", f"{source[role]}_workers")
        explicit = getattr(r, f"gpus_per_{source[role]}") is not None
        origins[("roles", role, "gpus_per_worker")] = (
            ("resources", f"gpus_per_{source[role]}")
            if explicit
            else ("resources", "gpus_per_node")  # srtctl's rule divides the node's GPUs
        )
        origins[("roles", role)] = ("resources",)
        roles[role] = body
    return roles


def _preamble(config: SrtConfig, cluster: ClusterConfig | None = None) -> str | None:
    parts = []
    if cluster is not None and cluster.default_bash_preamble:
        parts.append(cluster.default_bash_preamble)
    if config.setup_script:
        parts.append(setup_script_line(config.setup_script))
    return " && ".join(parts) if parts else None


def _install(config: SrtConfig) -> Any:
    d = config.dynamo
    if not d.install:
        return False
    if d.wheel:
        return {"wheel": d.wheel}
    if d.hash:
        return {"hash": d.hash}
    if d.top_of_tree:
        return {"top_of_tree": True}
    return {"version": d.version or "0.8.0"}


def _kv_events(value: Any) -> Any:
    if value is None:
        return False
    return value


def _profiling(config: SrtConfig) -> dict[str, Any] | None:
    p = config.profiling
    if p.type == "none":
        return None
    out: dict[str, Any] = {"type": p.type}
    for mode in ("prefill", "decode", "aggregated"):
        steps = getattr(p, mode)
        if steps is not None:
            out[mode] = steps.model_dump(exclude_none=True)
    if p.nsys_extra_args is not None:
        out["nsys_extra_args"] = p.nsys_extra_args
    return out


def _dynamo_options(config: SrtConfig) -> dict[str, Any]:
    b = config.backend
    obs = config.observability
    opts: dict[str, Any] = {
        "install": _install(config),
        "gpu_type": config.resources.gpu_type,
        "dump_config": config.enable_config_dump,
    }
    profiling = _profiling(config)
    if profiling is not None:
        opts["profiling"] = profiling
    if obs.enable_otel and obs.otel_endpoint:
        opts["otel_endpoint"] = obs.otel_endpoint
    if isinstance(b, SGLangBackend | VLLMBackend) and b.kv_events_config is not None:
        opts["kv_events"] = _kv_events(b.kv_events_config)
    if isinstance(b, VLLMBackend):
        opts["connector"] = b.connector
        opts["dp_launch_mode"] = b.dp_launch_mode
        opts["set_cuda_visible_devices"] = b.set_cuda_visible_devices
    if isinstance(b, TRTLLMBackend):
        trt = {
            "numa_memory_bind": b.numa_memory_bind,
            "sequential_node_start": b.sequential_node_start,
            "publish_events_and_metrics": True if obs.enabled else None,
        }
        opts.update({k: v for k, v in trt.items() if v is not None})
    if isinstance(b, MockerBackend):
        opts["mocker"] = {k: getattr(b, k) for k in MOCKER_KEYS if getattr(b, k) is not None}
    return opts


def _direct_options(config: SrtConfig, frontend: str) -> dict[str, Any]:
    b = config.backend
    opts: dict[str, Any] = {}
    if frontend == "sglang" and isinstance(b, SGLangBackend) and b.kv_events_config is not None:
        opts["kv_events"] = _kv_events(b.kv_events_config)
    if frontend == "vllm" and isinstance(b, VLLMBackend) and b.set_cuda_visible_devices:
        opts["set_cuda_visible_devices"] = True
    if frontend == "trtllm-serve":
        opts["gpu_type"] = config.resources.gpu_type
        if isinstance(b, TRTLLMBackend) and b.numa_memory_bind is not None:
            opts["numa_memory_bind"] = b.numa_memory_bind
    return opts


def engine_options(config: SrtConfig, frontend: str) -> dict[str, Any]:
    """``engine.options`` of the engine ``frontend`` names, srtctl's settings by srt's names."""
    timeout = config.health_check.max_attempts * config.health_check.interval_seconds
    opts: dict[str, Any] = {"readiness_timeout_seconds": float(timeout)}
    if frontend == "dynamo":
        opts.update(_dynamo_options(config))
    else:
        opts.update(_direct_options(config, frontend))
    return opts


def _balancer(config: SrtConfig) -> dict[str, Any]:
    fe = config.frontend
    balancer: dict[str, Any] = {
        "image": fe.nginx_container,
        "keepalive_timeout": fe.nginx_keepalive_timeout,
    }
    if fe.nginx_raise_ulimit:
        balancer["raise_ulimit"] = True
    if fe.nginx_session_affinity_header:
        balancer["session_affinity_header"] = fe.nginx_session_affinity_header
    return balancer


def frontend_args(args: Mapping[str, Any]) -> list[str]:
    """srtctl's ``frontend.args``: keys as written, in order; ``true`` bare, ``false`` and
    null dropped."""
    out: list[str] = []
    for key, value in args.items():
        if value is None or value is False:
            continue
        out.append(f"--{key}")
        if value is not True:
            out.append(str(value))
    return out


def _frontend(config: SrtConfig, cluster: ClusterConfig, origins: Origins) -> dict[str, Any]:
    fe = config.frontend
    ftype = FRONTEND_TYPES[fe.type]
    out: dict[str, Any] = {"type": ftype, "port": 8000}
    replicas = frontend_count(config)
    if replicas > 1:
        out["replicas"] = replicas
        out["internal_port"] = 8180
        out["balancer"] = _balancer(config)
        origins[("frontend", "replicas")] = ("frontend", "num_additional_frontends")
        origins[("frontend", "balancer")] = ("frontend",)
    if fe.args:
        out["args"] = frontend_args(fe.args)
        origins[("frontend", "args")] = ("frontend", "args")
    # srtctl gives `environment:` to Dynamo's frontend only (not the sglang router or the
    # trtllm-serve orchestrator)
    env = {**(config.environment if ftype == "dynamo" else {}), **fe.env}
    if env:
        out["env"] = env
        origins[("frontend", "env")] = ("frontend", "env")
    if ftype == "dynamo":
        preamble = _preamble(config, cluster)
        if preamble:
            out["preamble"] = preamble
            origins[("frontend", "preamble")] = ("setup_script",)
    origins[("frontend", "type")] = ("frontend", "type")
    return out


def _benchmark(config: SrtConfig, raw: Mapping[str, Any], origins: Origins) -> dict[str, Any]:
    bench = config.benchmark
    btype = BENCHMARK_TYPES[bench.type]
    out: dict[str, Any] = {"type": btype}
    raw_bench = raw.get("benchmark") if isinstance(raw.get("benchmark"), Mapping) else {}
    assert isinstance(raw_bench, Mapping)
    options = {
        k: v for k, v in raw_bench.items() if k not in BENCHMARK_NOT_OPTIONS and v is not None
    }
    if btype == "command":
        out["command"] = ["bash", "-c", bench.command or "true"]
        origins[("benchmark", "command")] = ("benchmark", "command")
        if bench.container_image:
            out["container"] = bench.container_image
    elif options and btype != "manual":
        out["options"] = options
        for key in options:
            origins[("benchmark", "options", key)] = ("benchmark", key)
    if bench.client_dedicated_node:
        out["dedicated_node"] = True
    env = {**config.environment, **bench.env}
    if env:
        out["env"] = env
        origins[("benchmark", "env")] = ("benchmark", "env")
    origins[("benchmark", "type")] = ("benchmark", "type")
    return out


def _services(config: SrtConfig, raw: Mapping[str, Any]) -> list[dict[str, Any]]:
    services: list[dict[str, Any]] = list(raw.get("services") or [])
    dedicated = config.infra.etcd_nats_dedicated_node
    uses_etcd = config.frontend.type in ("dynamo", "sglang")
    if dedicated and uses_etcd:
        services.append({"name": "etcd", "type": "etcd", "placement": {"node": "dedicated"}})
    nats_needed = config.dynamo.request_plane == "nats" or config.dynamo.event_plane == "nats"
    if (dedicated and uses_etcd and nats_needed) or config.infra.nats_max_payload_mb:
        nats: dict[str, Any] = {"name": "nats", "type": "nats"}
        if dedicated:
            nats["placement"] = {"node": "dedicated"}
        if config.infra.nats_max_payload_mb:
            nats["options"] = {"max_payload_mb": config.infra.nats_max_payload_mb}
        services.append(nats)
    kv = mooncake_store(config)
    if kv is not None:
        entry: dict[str, Any] = {"name": "mooncake-master", "type": "mooncake-master"}
        if kv.container:
            entry["container"] = kv.container
        if kv.master_extra_args:
            entry["args"] = _master_args(kv.master_extra_args)
        if kv.store_config:
            entry["options"] = {"store_config": kv.store_config}
        if dedicated:
            entry["placement"] = {"node": "dedicated"}
        services.append(entry)
    return services


def mooncake_store(config: SrtConfig) -> MooncakeKVStore | None:
    backend = config.backend
    if isinstance(backend, SGLangBackend | VLLMBackend):
        return backend.mooncake_kv_store
    return None


def _master_args(value: list[str] | dict[str, Any] | str) -> list[str]:
    """``master_extra_args`` as srtctl takes it: a list, a mapping (``--key value``) or a
    string split on blanks."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, dict):
        return frontend_args(value)
    return [str(v) for v in value]


def _slurm(config: SrtConfig, origins: Origins) -> dict[str, Any]:
    given = {
        "partition": config.slurm.partition,
        "account": config.slurm.account,
        "time": config.slurm.time_limit,
    }
    slurm: dict[str, Any] = {k: v for k, v in given.items() if v}
    origins[("slurm", "time")] = ("slurm", "time_limit")
    extra = [f"--{k}={v}" if v else f"--{k}" for k, v in config.sbatch_directives.items()]
    if extra:
        slurm["sbatch_extra"] = extra
        origins[("slurm", "sbatch_extra")] = ("sbatch_directives",)
    return slurm


def _resources(config: SrtConfig, origins: Origins) -> dict[str, Any]:
    resources: dict[str, Any] = {
        "gpus_per_node": config.resources.gpus_per_node,
        "layout": "packed",
    }
    if config.resources.spread_workers:
        resources["spread_workers"] = True
    b = config.backend
    if isinstance(b, VLLMBackend) and (
        b.allow_prefill_decode_colocation or b.allow_prefill_decode_colocation_across_nodes
    ):
        resources["colocate"] = True
        origins[("resources", "colocate")] = ("backend", "allow_prefill_decode_colocation")
    if config.resources.decode_nodes == 0 and config.resources.num_decode:
        # decode shares the prefill nodes: packed straight after prefill, no node of its own
        resources["colocate"] = True
        origins[("resources", "colocate")] = ("resources", "decode_nodes")
    return resources


def without_containers(doc: dict[str, Any], config: SrtConfig) -> None:
    """A site whose nodes have the engines installed (``[formats.srtctl] containers =
    false``): no job container, no mounts, no Dynamo install, and the model's own path."""
    doc.pop("container", None)
    doc.pop("mounts", None)
    if not config.model.path.startswith(HF_PREFIX):
        doc["engine"]["model"] = config.model.path
    options = doc["engine"]["options"]
    if "install" in options:
        options["install"] = False


def translate_config(
    config: SrtConfig,
    raw: Mapping[str, Any],
    cluster: ClusterConfig,
    containers: bool = True,
) -> tuple[dict[str, Any], Origins]:
    """The schema-2 document of one validated variant and where its parts came from
    (``raw`` is the variant as written, for what srtctl passes through untouched)."""
    origins: Origins = {
        ("name",): ("name",),
        ("container",): ("model", "container"),
        ("mounts",): ("model", "path"),
        ("resources",): ("resources",),
        ("resources", "gpus_per_node"): ("resources", "gpus_per_node"),
        ("resources", "spread_workers"): ("resources", "spread_workers"),
        ("dynamo", "request_plane"): ("dynamo", "request_plane"),
        ("dynamo", "event_plane"): ("dynamo", "event_plane"),
        ("engine",): ("backend",),
        ("engine", "type"): ("backend", "type"),
        ("engine", "model"): ("model", "path"),
        ("dynamo",): ("dynamo",),
        ("frontend",): ("frontend",),
        ("benchmark",): ("benchmark",),
        ("slurm",): ("slurm",),
        ("services",): ("services",),
        ("observability",): ("observability",),
    }
    frontend = _frontend(config, cluster, origins)
    doc: dict[str, Any] = {
        "schema": 2,
        "name": config.name,
        "container": container_image(config),
    }
    m = mounts(config, cluster)
    if m:
        doc["mounts"] = m
    doc["resources"] = _resources(config, origins)
    for key in MOCKER_KEYS:
        origins[("engine", "options", "mocker", key)] = ("backend", key)
    for key, where in OPTION_ORIGINS.items():
        origins[("engine", "options", key)] = where
    doc["engine"] = {
        "type": config.backend_type,
        "model": model_argument(config),
        "served_model_name": served_model_name(config),
        "options": engine_options(config, frontend["type"]),
    }
    planes: dict[str, Any] = {"request_plane": config.dynamo.request_plane}
    if config.dynamo.event_plane:
        planes["event_plane"] = config.dynamo.event_plane
    doc["dynamo"] = planes
    doc["frontend"] = frontend
    doc["roles"] = _roles(config, cluster, origins)
    doc["benchmark"] = _benchmark(config, raw, origins)
    slurm = _slurm(config, origins)
    if slurm:
        doc["slurm"] = slurm
    doc["observability"] = {"metrics": config.observability.tachometer.enabled}
    services = _services(config, raw)
    if services:
        doc["services"] = services
    written = len(raw.get("services") or [])
    for i, entry in enumerate(services[written:], start=written):
        mooncake = entry.get("type") == "mooncake-master"
        origins[("services", i)] = ("backend", "mooncake_kv_store") if mooncake else ("infra",)
    if not containers:
        without_containers(doc, config)
    return doc, origins
