"""etcd + NATS and the Mooncake master (doc §8): the services the workers discover each other by."""

from __future__ import annotations

import json
from typing import Any

from srt_srtctl.context import BuildContext
from srt_srtctl.process import ProcessSpec, SrunSpec
from srt_srtctl.schema import SGLangBackend, VLLMBackend
from srt_srtctl.topology import (
    ETCD_PORT,
    MOONCAKE_HTTP_PORT,
    MOONCAKE_METRICS_PORT,
    MOONCAKE_RPC_PORT,
    NATS_PORT,
)


def build_infra(ctx: BuildContext) -> ProcessSpec | None:
    if not ctx.starts_infra:
        return None
    node = ctx.topology.roles.infra
    log_dir = "/logs" if ctx.fidelity.fixed("setup-head-host-log-dir") else ctx.values.log_dir
    mounts = ctx.base_mounts()
    mounts["/tmp/setup_head.py"] = f"{ctx.values.srtctl_pkg}/cli/setup_head.py"
    mounts["/host-tmp"] = "/tmp"
    return ProcessSpec(
        stage="infra",
        name="infra",
        nodes=[node],
        argv=["python3", "/tmp/setup_head.py", "--name", ctx.config.name, "--log-dir", log_dir],
        container_image=ctx.container,
        container_mounts=mounts,
        srun=SrunSpec(nodelist=[node], output=f"{ctx.values.log_dir}/infra.out"),
    )


def infra_services(ctx: BuildContext) -> dict[str, Any] | None:
    """What setup_head.py starts inside the infra container."""
    if not ctx.starts_infra:
        return None
    node = ctx.topology.roles.infra
    nats = ["/configs/nats-server", "-js", "-sd", "/tmp/nats"]
    files: dict[str, str] = {}
    mb = ctx.config.infra.nats_max_payload_mb
    if mb is not None:
        nats = ["/configs/nats-server", "-c", "/tmp/nats.conf"]
        files["/tmp/nats.conf"] = (
            f"max_payload: {mb * 1024 * 1024}\njetstream {{\n  store_dir: /tmp/nats\n}}\n"
        )
    return {
        "node": node,
        "nats_argv": nats,
        "etcd_argv": [
            "/configs/etcd",
            "--data-dir",
            "/tmp/etcd",
            "--listen-client-urls",
            f"http://0.0.0.0:{ETCD_PORT}",
            "--advertise-client-urls",
            f"http://{ctx.values.ip(node)}:{ETCD_PORT}",
        ],
        "ports": {"etcd_client": ETCD_PORT, "nats": NATS_PORT},
        "files": files,
    }


def mooncake_master_argv(extra: Any) -> list[str]:
    argv = [
        "mooncake_master",
        f"--port={MOONCAKE_RPC_PORT}",
        "--enable_http_metadata_server=true",
        f"--http_metadata_server_port={MOONCAKE_HTTP_PORT}",
        "--eviction_high_watermark_ratio=0.9",
        "--default_kv_lease_ttl=10000",
        "--rpc_thread_num=16",
        "--enable_metric_reporting=true",
        f"--metrics_port={MOONCAKE_METRICS_PORT}",
    ]
    if isinstance(extra, str):
        argv += extra.split()
    elif isinstance(extra, list):
        argv += [str(a) for a in extra]
    elif isinstance(extra, dict):
        argv += [f"--{k}={v}" for k, v in extra.items()]
    return argv


def build_mooncake(ctx: BuildContext) -> ProcessSpec | None:
    backend = ctx.config.backend
    if not isinstance(backend, SGLangBackend | VLLMBackend) or backend.mooncake_kv_store is None:
        return None
    store = backend.mooncake_kv_store
    node = ctx.topology.roles.infra
    return ProcessSpec(
        stage="mooncake",
        name="mooncake_master",
        nodes=[node],
        argv=mooncake_master_argv(store.master_extra_args),
        container_image=store.container or ctx.container,
        container_mounts=ctx.base_mounts(),
        srun=SrunSpec(nodelist=[node], output=f"{ctx.values.log_dir}/mooncake_master.out"),
    )


def mooncake_store_json(ctx: BuildContext) -> str | None:
    backend = ctx.config.backend
    if not isinstance(backend, VLLMBackend) or backend.mooncake_kv_store is None:
        return None
    store = dict(backend.mooncake_kv_store.store_config or {})
    store["master_server_address"] = (
        f"{ctx.values.ip(ctx.topology.roles.infra)}:{MOONCAKE_RPC_PORT}"
    )
    return json.dumps(store, indent=2)
