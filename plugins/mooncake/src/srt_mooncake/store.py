"""The ``mooncake-store`` kind: a standalone Mooncake store on each node of its placement.

A store gives the master's pool a DRAM segment of its node, so the engines' embedded
clients can run with ``MOONCAKE_GLOBAL_SEGMENT_SIZE=0`` and the memory is owned by a process
that outlives a worker restart. One entry per role lets prefill and decode nodes give
different amounts (``options.global_segment_size``).

The store reads one config file srt writes into its work directory (``--config``, and
``MOONCAKE_CONFIG_PATH`` for a recipe's own command): the master's address from the job's
discovery environment (so an ``external`` master is honoured too), the node's IP as
``local_hostname``, and the sizes. Its REST server opens only after the store registered
with the master and mounted its segment, so a TCP accept on it is the readiness signal.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import DefaultProbe, Port, Problem, ServerKind, ServerOptions

from srt_mooncake import env
from srt_mooncake.sizes import Size

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Recipe, ServiceSpec

#: ``python -m mooncake.mooncake_store_service`` as the console script Mooncake installs:
#: the same entry point, found on PATH, in srt's venv or through the site config.
BINARY = "mc_store_rest_server"
INSTALL_HINT = (
    "install Mooncake (PyPI, into srt's venv: pip install 'srt-mooncake[server]', which needs"
    " Debian's libibverbs1), or set options.binary, or [binaries] mc_store_rest_server in the"
    " site config"
)
CONFIG_FILE = "mooncake-store.json"
#: The start phases in their order (the recipe's ``start`` vocabulary).
_PHASES = ("infra", "before_workers", "after_frontend")
#: Placements whose nodes are where a role's workers run, by role (``None``: every role).
_ROLE_PLACEMENTS: dict[str, frozenset[str] | None] = {
    "prefill": frozenset({"prefill"}),
    "decode": frozenset({"decode"}),
    "agg": frozenset({"agg"}),
    "workers": None,
    "compute": None,
    "all": None,
}


class StoreOptions(ServerOptions):
    """The REST port and the memory this store gives; protocol and devices come from env."""

    port: Port = Field(
        8800,
        description="REST port (readiness; /api/put, /api/get/<key>); binds 0.0.0.0. A `--port`"
        " in args or command is read as this port.",
    )
    global_segment_size: Size | None = Field(
        None,
        description="DRAM this store gives the pool (bytes or '100gb'). Default: the entry's"
        " MOONCAKE_GLOBAL_SEGMENT_SIZE, else Mooncake's 3.125 GiB.",
    )
    local_buffer_size: Size | None = Field(
        None,
        description="Transfer buffer (bytes or '1gb'). Default: the entry's"
        " MOONCAKE_LOCAL_BUFFER_SIZE, else Mooncake's 1 GiB.",
    )


def port_in_argv(argv: list[str]) -> tuple[int | None, str | None]:
    """The last ``--port N`` / ``--port=N`` of ``argv`` (argparse's winner) as (port, None),
    or (None, why it is not a port)."""
    found: str | None = None
    for i, word in enumerate(argv):
        if word == "--port" and i + 1 < len(argv):
            found = argv[i + 1]
        elif word.startswith("--port="):
            found = word.split("=", 1)[1]
    if found is None:
        return None, None
    if not found.isdigit() or not 1 <= int(found) <= 65535:
        return None, f"--port {found!r} is not a port (1-65535)"
    return int(found), None


def rest_port(spec: ServiceSpec, options: StoreOptions) -> int:
    """The REST port the store listens on: a ``--port`` the recipe writes, else the option."""
    written, _ = port_in_argv([*(spec.command or ()), *spec.args])
    return written if written is not None else options.port


def masters(recipe: Recipe) -> list[tuple[int, ServiceSpec]]:
    """The recipe's enabled master entries, with their positions."""
    return [
        (i, s) for i, s in enumerate(recipe.services) if s.type == env.MASTER_KIND and s.enabled
    ]


class MooncakeStoreKind(ServerKind):
    name: ClassVar[str] = env.STORE_KIND
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": "The specification runs `python -m mooncake.mooncake_store_service`; srt"
        " runs Mooncake's `mc_store_rest_server` with a config file pointing at the master:"
        " the same store, with a REST port that opens only once it registered with the"
        " master, which gives it a readiness gate the Python service lacks.",
        "placement": "One store per worker node by default (the specification's example"
        " places them per role), so the DRAM of every node that runs workers is pooled.",
        "readiness": "A TCP connect to the REST port, open once the store registered its"
        " segment with the master (the specification names none).",
        "environment": "Workers on the store's nodes get `MOONCAKE_GLOBAL_SEGMENT_SIZE=0`"
        " (the specification's Mooncake section: the store owns the node's DRAM, the"
        " workers' embedded clients give none); workers on other nodes keep their own.",
    }
    summary: ClassVar[str] = (
        "A standalone Mooncake store per node: gives the master's pool DRAM; needs a master."
    )
    readiness_summary: ClassVar[str] = "tcp 8800 (REST, open once registered)"
    Options: ClassVar[type[StoreOptions]] = StoreOptions
    binary_name: ClassVar[str] = BINARY
    install_hint: ClassVar[str] = INSTALL_HINT

    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    #: one per worker node: where the engines' clients are (never the head alone, silently)
    default_placement: ClassVar[str] = "workers"
    default_readiness_timeout: ClassVar[float] = 300.0

    def ports(self, options: Any) -> Mapping[str, int | None]:
        assert isinstance(options, StoreOptions)
        return {"port": options.port}

    def listen_ports(self, spec: ServiceSpec, options: Any) -> tuple[int, ...]:
        assert isinstance(options, StoreOptions)
        return (rest_port(spec, options),)

    # ------------------------------------------------------------------ validation

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, StoreOptions)
        out = _master_problems(spec, recipe)
        written, bad = port_in_argv([*(spec.command or ()), *spec.args])
        where = ("args",) if spec.command is None else ("command",)
        if bad is not None:
            out.append(Problem(where, bad))
        elif written is not None and "port" in options.model_fields_set and written != options.port:
            out.append(
                Problem(
                    ("options", "port"),
                    f"is {options.port} but {where[0]} says --port {written}; give the port once",
                )
            )
        elif written is None and spec.command is not None:
            out.append(
                Problem(
                    ("command",),
                    f"has no --port: srt probes and claims the REST port {options.port}, and the"
                    " store service listens on 8080 unless told otherwise",
                    warning=True,
                )
            )
        for option, key in (
            ("global_segment_size", env.GLOBAL_SEGMENT_SIZE),
            ("local_buffer_size", env.LOCAL_BUFFER_SIZE),
        ):
            if getattr(options, option) is not None and key in spec.env:
                out.append(
                    Problem(
                        ("env", key),
                        f"is overridden by options.{option}, which the store's config file"
                        " carries (the store reads the file, not this variable)",
                        warning=True,
                    )
                )
        return out

    # ------------------------------------------------------------------ launch description

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, StoreOptions)
        args = ["--config", f"{{work_dir}}/{CONFIG_FILE}"]
        if port_in_argv(list(spec.args))[0] is None:  # else argparse takes the recipe's
            args += ["--port", str(options.port)]
        return args

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        assert isinstance(options, StoreOptions)
        return {CONFIG_FILE: config_text(spec, options, ctx.discovery_env)}

    def default_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        out = {env.LOCAL_HOSTNAME: "{node_ip}", env.TCP_BIND_ADDRESS: "{node_ip}"}
        protocol = ctx.discovery_env.get(env.PROTOCOL)
        if protocol:
            out[env.PROTOCOL] = protocol
        return out

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        # The master's address as every other consumer gets it (external included), and the
        # file, so a recipe's own `python -m mooncake.mooncake_store_service` reads it too.
        out = {env.CONFIG_PATH: f"{{work_dir}}/{CONFIG_FILE}"}
        for key in (env.MASTER, env.METADATA):
            value = ctx.discovery_env.get(key)
            if value is not None:
                out[key] = value
        return out

    def wildcard_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        # the REST server binds 0.0.0.0 whatever address it is given
        assert isinstance(options, StoreOptions)
        return (rest_port(spec, options),)

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        assert isinstance(options, StoreOptions)
        return DefaultProbe("tcp", {"port": rest_port(spec, options)})

    def container_fallback(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> str | None:
        found = masters(recipe)
        return found[0][1].container if found else None

    def worker_env(
        self, spec: ServiceSpec, options: Any, role: str, recipe: Recipe
    ) -> dict[str, str]:
        # The store owns its nodes' segments: the engines' embedded clients there give none.
        placement = spec.placement
        node = self.default_placement if placement is None else placement.node
        if node is None or node not in _ROLE_PLACEMENTS:
            return {}
        roles = _ROLE_PLACEMENTS[node]
        if roles is not None and role not in roles:
            return {}
        return {env.GLOBAL_SEGMENT_SIZE: "0"}


def _master_problems(spec: ServiceSpec, recipe: Recipe) -> list[Problem]:
    """A store needs a master, and a master that is up before the store starts."""
    found = masters(recipe)
    if not found:
        return [
            Problem(
                ("type",),
                "needs a mooncake-master entry: the store registers with the job's master"
                " (declare `- {name: mooncake-master, type: mooncake-master}`, or one with"
                " external: host:port)",
            )
        ]
    at, master = found[0]
    if master.external is not None:
        return []
    master_start = master.start or "before_workers"
    start = spec.start or MooncakeStoreKind.default_start
    if _PHASES.index(start) < _PHASES.index(master_start):
        return [
            Problem(
                ("start",),
                f"is {start}, before services[{master.name}] starts ({master_start}): the store"
                " registers with the master at start-up",
            )
        ]
    mine = next(i for i, s in enumerate(recipe.services) if s.name == spec.name)
    waits = spec.after is not None and master.name in spec.after
    if start == master_start and mine < at and not waits:
        return [
            Problem(
                ("type",),
                f"starts before services[{master.name}] (it is declared first): declare the"
                f" store after the master, or write after: [{master.name}]",
            )
        ]
    return []


def config_text(spec: ServiceSpec, options: StoreOptions, discovery: Mapping[str, str]) -> str:
    """The store's config: the master's addresses, this node, the sizes, the transport.

    Sizes and transport follow the options, then the entry's own ``MOONCAKE_*`` env (the way
    the spec's example recipe gives them), then Mooncake's defaults (left out of the file).
    """
    data: dict[str, Any] = {
        "local_hostname": spec.env.get(env.LOCAL_HOSTNAME, "{node_ip}"),
        "metadata_server": discovery.get(env.METADATA, env.P2P_HANDSHAKE),
        "master_server_address": discovery.get(env.MASTER, ""),
        "protocol": spec.env.get(env.PROTOCOL) or discovery.get(env.PROTOCOL) or "tcp",
        "device_name": spec.env.get(env.DEVICE, ""),
    }
    for option, key in (
        ("global_segment_size", env.GLOBAL_SEGMENT_SIZE),
        ("local_buffer_size", env.LOCAL_BUFFER_SIZE),
    ):
        value = getattr(options, option)
        if value is not None:
            data[option] = value
        elif key in spec.env:
            data[option] = spec.env[key]  # rendered like the env; Mooncake reads "100gb"
    return json.dumps(data, indent=2) + "\n"
