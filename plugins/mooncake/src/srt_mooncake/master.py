"""The ``mooncake-master`` kind: Mooncake's KV-cache master, declared by name, never implied.

Every Mooncake client (the standalone stores, the connectors embedded in SGLang and vLLM
workers) registers with the master at start-up, so it starts before the workers (phase
``before_workers``), it is critical, and everyone is told where it is through the
discovery environment. srt owns its three ports: RPC (``MOONCAKE_MASTER``), the HTTP
metadata server the transfer engines exchange their segment descriptors through, and the
metrics/admin server, whose ``/health`` answers only once the master serves.

It stops after everything else of the job (``stops_last``): a store whose master is gone
spends about ten seconds retrying to unmount its segment before it exits, a worker's
embedded client the same, so the master outlives its clients.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, field_validator
from srt_services.extend import (
    DefaultProbe,
    KindOptions,
    MetricsSpec,
    Port,
    Problem,
    ServerKind,
    ServerOptions,
    url_host,
)

from srt_mooncake import env
from srt_mooncake.sizes import Size

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Recipe, ServiceSpec

#: The command name, and the key of the site config's ``[binaries]`` table.
BINARY = "mooncake_master"
INSTALL_HINT = (
    "install Mooncake (PyPI, into srt's venv: pip install 'srt-mooncake[server]', which needs"
    " Debian's libibverbs1), or set options.binary, or [binaries] mooncake_master in the site"
    " config"
)
#: The vLLM connector's config file, in the master's work directory (the job directory is
#: shared, and mounted at the same path in every container).
STORE_CONFIG_FILE = "mooncake_store_config.json"
_PROTOCOL = re.compile(r"^[a-z][a-z0-9_]*$")


class StoreConfig(KindOptions):
    """The vLLM Mooncake connector's JSON (``MOONCAKE_CONFIG_PATH``), Mooncake's own keys.

    Closed, so a misspelt key is an error here rather than a default silently used by every
    worker. ``master_server_address`` is srt's to write; ``metadata_server`` and
    ``protocol`` default to what the master serves.
    """

    local_hostname: str | None = Field(
        None, description="One value for every worker; leave it out to use each worker's IP."
    )
    metadata_server: str | None = Field(
        None, description="Default: the master's HTTP metadata server (or P2PHANDSHAKE)."
    )
    master_server_address: str | None = Field(
        None, description="Written by srt (the master's RPC address); a value here is replaced."
    )
    global_segment_size: Size | None = Field(
        None, description="DRAM each worker gives the pool (bytes or '4GB'); 0: none."
    )
    local_buffer_size: Size | None = Field(None, description="Each worker's transfer buffer.")
    protocol: str | None = Field(None, description="Default: the master's `protocol` option.")
    device_name: str | None = Field(None, description="RDMA devices, e.g. 'mlx5_0,mlx5_1'.")
    enable_ssd_offload: bool | None = None
    ssd_offload_path: str | None = None
    tenant_id: str | None = None
    enable_client_http_server: bool | None = None
    client_http_port: Port | None = None


class MasterOptions(ServerOptions):
    """The master's ports and the knobs srt sets on its command line; the rest go in ``args``."""

    rpc_port: Port = Field(8700, description="RPC port: MOONCAKE_MASTER, where clients register.")
    metadata_port: Port | None = Field(
        8701,
        description="HTTP metadata server (MOONCAKE_TE_META_DATA_SERVER); binds 0.0.0.0 whatever"
        " the host. null runs none: clients then use P2PHANDSHAKE.",
    )
    metrics_port: Port = Field(
        8702, description="Metrics and admin server: /health (readiness), /metrics (scraped)."
    )
    eviction_high_watermark_ratio: float = Field(
        0.9, description="Memory use (0-1] above which the master evicts."
    )
    default_kv_lease_ttl: int = Field(
        10000, description="Lease of a KV object in milliseconds (objects are pinned this long)."
    )
    rpc_thread_num: int = Field(16, description="RPC server threads.")
    enable_metric_reporting: bool = Field(
        True, description="Log a metrics summary periodically (the /metrics endpoint is always on)."
    )
    protocol: str = Field(
        "tcp", description="Transport consumers are told (MOONCAKE_PROTOCOL): tcp, rdma..."
    )
    store_config: StoreConfig | None = Field(
        None,
        description="The vLLM Mooncake connector's JSON: written into the master's work"
        " directory, its path given to every worker as MOONCAKE_CONFIG_PATH.",
    )

    @field_validator("eviction_high_watermark_ratio")
    @classmethod
    def _ratio(cls, value: float) -> float:
        if not 0 < value <= 1:
            raise ValueError(f"must be more than 0 and at most 1, got {value}")
        return value

    @field_validator("default_kv_lease_ttl", "rpc_thread_num")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be a positive whole number, got {value}")
        return value

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: str) -> str:
        if not _PROTOCOL.match(value):
            raise ValueError(
                f"must be a Mooncake transport name in lower case (tcp, rdma...), got {value!r}"
            )
        return value


def _literal(text: str) -> str:
    """``text`` with every ``{name}`` doubled, so srt writes it as it is: a store_config value
    is the same for every worker and must not be rendered with the master's values."""
    return re.sub(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", r"{{\1}}", text)


def store_config_text(config: StoreConfig, options: MasterOptions, host: str) -> str:
    """The connector's JSON: the recipe's keys, the master's address, and the defaults."""
    data: dict[str, Any] = {
        k: _literal(v) if isinstance(v, str) else v
        for k, v in config.model_dump(exclude_none=True).items()
    }
    data["master_server_address"] = f"{host}:{options.rpc_port}"
    data.setdefault("metadata_server", env.metadata_url(host, options.metadata_port))
    data.setdefault("protocol", options.protocol)
    return json.dumps(data, indent=2) + "\n"


class MooncakeMasterKind(ServerKind):
    name: ClassVar[str] = env.MASTER_KIND
    spec_departures: ClassVar[Mapping[str, str]] = {
        "readiness": "The specification waits for the master's ports; srt waits for `GET"
        " /health` on the metrics port, which answers 200 only once the RPC and metadata"
        " servers are up (a stronger gate); with the entry's own command, the RPC port."
        " Timeout 300 s: a cold container needed minutes.",
    }
    summary: ClassVar[str] = (
        "Mooncake's KV-cache master: RPC, HTTP metadata and metrics ports srt owns; declared."
    )
    readiness_summary: ClassVar[str] = "http /health on 8702"
    Options: ClassVar[type[MasterOptions]] = MasterOptions
    binary_name: ClassVar[str] = BINARY
    install_hint: ClassVar[str] = INSTALL_HINT

    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "infra"
    allowed_placements: ClassVar[frozenset[str] | None] = frozenset({"head", "infra", "dedicated"})
    supports_external: ClassVar[bool] = True
    #: what consumers of an external master are told still depends on these
    external_options: ClassVar[frozenset[str]] = frozenset({"metadata_port", "protocol"})
    supports_dedicated: ClassVar[bool] = True
    #: on the infra node with etcd and NATS: all three dedicated, or none
    shares_infra_node: ClassVar[bool] = True
    stops_last: ClassVar[bool] = True
    #: a cold container on a busy node has needed minutes before the master answered (the
    #: original's per-port 120 s was too short there)
    default_readiness_timeout: ClassVar[float] = 300.0

    def ports(self, options: Any) -> Mapping[str, int | None]:
        assert isinstance(options, MasterOptions)
        return {
            "rpc_port": options.rpc_port,
            "metadata_port": options.metadata_port,
            "metrics_port": options.metrics_port,
        }

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, MasterOptions)
        out: list[Problem] = []
        if spec.external is not None:
            problem = env.external_problem(spec.external)
            if problem is not None:
                out.append(Problem(("external",), problem))
        config = options.store_config
        if config is not None and config.master_server_address is not None:
            out.append(
                Problem(
                    ("options", "store_config", "master_server_address"),
                    "is written by srt (this master's RPC address); drop it",
                    warning=True,
                )
            )
        return out

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, MasterOptions)
        # Bound to the node's IP like every srt server; Mooncake's HTTP metadata server binds
        # 0.0.0.0 whatever --http_metadata_server_host says.
        args = [
            "--rpc_address={node_ip}",
            f"--rpc_port={options.rpc_port}",
        ]
        if options.metadata_port is None:
            args.append("--enable_http_metadata_server=false")
        else:
            args += [
                "--enable_http_metadata_server=true",
                "--http_metadata_server_host={node_ip}",
                f"--http_metadata_server_port={options.metadata_port}",
            ]
        return [
            *args,
            "--metrics_host={node_ip}",
            f"--metrics_port={options.metrics_port}",
            f"--eviction_high_watermark_ratio={options.eviction_high_watermark_ratio:g}",
            f"--default_kv_lease_ttl={options.default_kv_lease_ttl}",
            f"--rpc_thread_num={options.rpc_thread_num}",
            f"--enable_metric_reporting={str(options.enable_metric_reporting).lower()}",
        ]

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        assert isinstance(options, MasterOptions)
        if options.store_config is None:
            return {}
        host = url_host(ctx.node.ip)
        return {STORE_CONFIG_FILE: store_config_text(options.store_config, options, host)}

    def wildcard_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        # Mooncake's HTTP metadata server binds 0.0.0.0 whatever its host flag says
        assert isinstance(options, MasterOptions)
        if spec.command is not None or options.metadata_port is None:
            return ()
        return (options.metadata_port,)

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        # /health is 200 only once the master serves (its admin server starts after the RPC
        # server and the metadata server are up); a recipe's own command may not serve it,
        # so then the RPC port accepting is all there is to go by.
        assert isinstance(options, MasterOptions)
        if spec.command is not None:
            return DefaultProbe("tcp", {"port": options.rpc_port})
        return DefaultProbe(
            "http", {"port": options.metrics_port, "path": "/health", "status": 200}
        )

    def metrics(self, spec: ServiceSpec, options: Any) -> list[MetricsSpec]:
        assert isinstance(options, MasterOptions)
        return [MetricsSpec(port=options.metrics_port, path="/metrics")]

    def job_placeholders(self, spec: ServiceSpec, options: Any) -> dict[str, str]:
        # {master_port}/{metadata_port} are this master's, wherever the recipe moved them
        # (an external master: the port of its address); "" when no metadata server runs
        assert isinstance(options, MasterOptions)
        rpc: int | None = options.rpc_port
        if spec.external is not None:
            parts = env.split_address(spec.external)
            rpc = parts[1] if parts is not None else None
        out = {"metadata_port": "" if options.metadata_port is None else str(options.metadata_port)}
        if rpc is not None:
            out["master_port"] = str(rpc)
        return out

    def consumer_env(self, spec: ServiceSpec, options: Any, host: str | None) -> dict[str, str]:
        assert isinstance(options, MasterOptions)
        if host is None:  # external: the address given, its host for the metadata server
            address = (spec.external or "").strip()
            parts = env.split_address(address)
            if parts is None:
                return {}
            master, host = address, parts[0]
        else:
            master = f"{host}:{options.rpc_port}"
        return {
            env.MASTER: master,
            env.METADATA: env.metadata_url(host, options.metadata_port),
            env.PROTOCOL: options.protocol,
        }

    def worker_env(
        self, spec: ServiceSpec, options: Any, role: str, recipe: Recipe
    ) -> dict[str, str]:
        # Each worker's embedded client advertises its own node, not the one the master or
        # the head runs on; a role's env still wins (srt layers it over this).
        assert isinstance(options, MasterOptions)
        out = {env.LOCAL_HOSTNAME: "{node_ip}", env.TCP_BIND_ADDRESS: "{node_ip}"}
        if options.store_config is not None and spec.external is None:
            out[env.CONFIG_PATH] = f"{{job_dir}}/work/service_{spec.name}/{STORE_CONFIG_FILE}"
        return out
