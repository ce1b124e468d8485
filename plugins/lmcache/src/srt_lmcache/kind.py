"""The ``lmcache-server`` service kind: an LMCache multi-process cache server per node.

vLLM workers with ``connector: lmcache-mp`` keep their KV cache chunks in an LMCache
server outside the engine (``LMCacheMPConnector``), so the server must be up before the
first worker starts (phase ``before_workers``), on every node of the roles that use it,
and it is critical: a worker whose cache server died fails its requests.

``lmcache server`` listens on two ports srt owns: the request port (ZMQ; the workers) and
the HTTP port (``/healthcheck``, ``/status``, ``/metrics``; srt's probe and the scraper).
It refuses to start without an L1 (host memory) size and eviction policy, so the kind
always passes them (``options.l1_size_gb``, ``options.eviction_policy``) unless the recipe
configures L1 through ``--l1-manager`` in ``args``.

LMCache reports usage to its vendor unless told not to; the kind owns
``LMCACHE_TRACK_USAGE=false`` and ``DO_NOT_TRACK=1``, whatever the recipe says.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field
from srt_services.extend import (
    DefaultProbe,
    ImpliedService,
    MetricsSpec,
    Port,
    Problem,
    ServerKind,
    ServerOptions,
)

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Recipe, ServiceSpec

KIND = "lmcache-server"
#: The connector that implies this kind (core's table says the same).
CONNECTOR = "lmcache-mp"
BINARY = "lmcache"
INSTALL_HINT = (
    "install LMCache where the service runs (pip install lmcache; without a GPU, install"
    " torch's CPU wheel first), or set options.binary, or [binaries] lmcache in the site config"
)
#: What the kind owns: LMCache sends usage telemetry to its vendor otherwise.
TELEMETRY_OFF = {"LMCACHE_TRACK_USAGE": "false", "DO_NOT_TRACK": "1"}
#: SGLang's LMCache integration reads the server's address from these (``mp_host``,
#: ``mp_port`` of its engine config), unless a config file names it.
SGLANG_HOST, SGLANG_PORT = "LMCACHE_MP_HOST", "LMCACHE_MP_PORT"
SGLANG_FLAG, SGLANG_CONFIG_FLAG = "--enable-lmcache", "--lmcache-config-file"
#: LMCache hashes token chunks; workers and server must hash alike.
HASH_SEED = "PYTHONHASHSEED"
#: Placements whose nodes are every worker node (so every role's workers have a server).
EVERY_WORKER_NODE = frozenset({"workers", "compute", "all"})


class LMCacheOptions(ServerOptions):
    """The server's ports, bind addresses and L1 cache; everything else goes in ``args``."""

    port: Port = Field(
        8750, description="Request port (ZMQ) the workers connect to (`lmcache.mp.port`)."
    )
    http_port: Port = Field(
        8751, description="HTTP port: `/healthcheck` (readiness), `/status`, `/metrics`."
    )
    host: str | None = Field(
        None,
        description="Address the request port binds. Default: `0.0.0.0` on cluster nodes, so"
        " vLLM ranks reach it over localhost (the connector's default host) and SGLang over"
        " the node's IP; on `srt run`'s virtual nodes (loopback addresses) the node's own"
        " address, so each virtual node runs its own server.",
    )
    http_host: str | None = Field(
        None,
        description="Address the HTTP port binds. Default: the node's IP (the admin API has"
        " no authentication, so it is never bound to every interface by default).",
    )
    l1_size_gb: float = Field(
        8.0,
        gt=0,
        description="Host memory for the L1 cache, per server, in GB (`--l1-size-gb`;"
        " allocated at start). Left out when `args` configure L1 with `--l1-manager`.",
    )
    eviction_policy: Literal["LRU", "ARC", "IsolatedLRU", "noop"] = Field(
        "LRU", description="L1 eviction policy (`--eviction-policy`)."
    )


def _args_name(spec: ServiceSpec, flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in spec.args)


def bind_host(written: str | None, node_ip: str) -> str:
    """The request port's bind address (see :attr:`LMCacheOptions.host`)."""
    if written:
        return written
    try:
        loopback = ipaddress.ip_address(node_ip).is_loopback
    except ValueError:  # a symbolic dry run (<node0-ip>) or a host name: a cluster node
        loopback = False
    return node_ip if loopback else "0.0.0.0"  # noqa: S104 - reachable over localhost


class LMCacheServerKind(ServerKind):
    name: ClassVar[str] = KIND
    implied_by_summary: ClassVar[str] = (
        "a vLLM role with connector lmcache-mp (on that role's nodes)"
    )
    spec_departures: ClassVar[Mapping[str, str]] = {
        "readiness": "`GET /healthcheck` as specified; the timeout is 300 s (LMCache imports"
        " torch before it listens).",
    }
    summary: ClassVar[str] = (
        "LMCache multi-process cache server per worker node (vLLM connector lmcache-mp)."
    )
    readiness_summary: ClassVar[str] = "http /healthcheck on 8751"
    Options: ClassVar[type[LMCacheOptions]] = LMCacheOptions
    binary_name: ClassVar[str] = BINARY
    install_hint: ClassVar[str] = INSTALL_HINT

    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "workers"
    #: Importing torch and allocating L1 take seconds on an idle node, minutes on a busy one.
    default_readiness_timeout: ClassVar[float] = 300.0
    #: srt's probe backs off towards this gap: with LMCache's 4-10 s start a 1 s cap left
    #: the ready event a median 0.33 s behind the server (bench/lmcache_readiness.py); a
    #: refused connect every quarter second costs nothing next to the workers waiting.
    default_readiness_interval: ClassVar[float] = 0.25

    def ports(self, options: Any) -> Mapping[str, int | None]:
        assert isinstance(options, LMCacheOptions)
        return {"port": options.port, "http_port": options.http_port}

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, LMCacheOptions)
        argv = [
            "server",
            "--host",
            bind_host(options.host, ctx.node.ip),
            "--port",
            str(options.port),
            "--http-host",
            options.http_host or ctx.node.ip,
            "--http-port",
            str(options.http_port),
        ]
        if not _args_name(spec, "--l1-manager"):
            argv += [
                "--l1-size-gb",
                f"{options.l1_size_gb:g}",
                "--eviction-policy",
                options.eviction_policy,
            ]
        return argv

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        # /healthcheck answers 503 until the cache engine exists, 200 after: an open port
        # (the HTTP server starts first) does not prove the server can take requests.
        assert isinstance(options, LMCacheOptions)
        return DefaultProbe(
            "http", {"port": options.http_port, "path": "/healthcheck", "status": 200}
        )

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        return dict(TELEMETRY_OFF)

    def metrics(self, spec: ServiceSpec, options: Any) -> list[MetricsSpec]:
        assert isinstance(options, LMCacheOptions)
        return [MetricsSpec(port=options.http_port, path="/metrics")]

    def worker_env(
        self, spec: ServiceSpec, options: Any, role: str, recipe: Recipe
    ) -> dict[str, str]:
        """SGLang workers started with ``--enable-lmcache`` learn the server's address, unless
        the recipe gives them a config file or an address of its own."""
        assert isinstance(options, LMCacheOptions)
        host = _host_for(spec, role)
        if host is None or not sglang_uses_env(recipe, role):
            return {}
        return {SGLANG_HOST: host, SGLANG_PORT: str(options.port)}

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, LMCacheOptions)
        out: list[Problem] = []
        for key in ("host", "http_host"):
            value = getattr(options, key)
            if value is not None and not value.strip():
                out.append(Problem(("options", key), "must not be blank (omit it for the default)"))
        if _args_name(spec, "--l1-manager") and {"l1_size_gb", "eviction_policy"} & set(
            spec.options
        ):
            out.append(
                Problem(
                    ("options",),
                    "l1_size_gb and eviction_policy have no effect: args configure L1 with"
                    " --l1-manager",
                    warning=True,
                )
            )
        for flag in ("--host", "--port", "--http-host", "--http-port"):
            if _args_name(spec, flag) and spec.command is None:
                out.append(
                    Problem(
                        ("args",),
                        f"{flag} is set by srt from options (the port ledger, the readiness"
                        " probe and the workers' address follow them); set it there instead",
                    )
                )
        return out


def _host_for(spec: ServiceSpec, role: str) -> str | None:
    """Where ``role``'s workers find this server, as a placeholder rendered per worker."""
    where = spec.placement.node if spec.placement and spec.placement.node else "workers"
    if spec.placement and spec.placement.pool:
        return None  # on another service's nodes: not the workers' own
    if where in EVERY_WORKER_NODE or where == role:
        return "{node_ip}"  # one server on each of the worker's nodes
    if where in {"head", "infra"}:
        return f"{{{where}_ip}}"
    return None


def role_argv(recipe: Recipe, role: str) -> list[str]:
    spec = recipe.roles.get(role)  # type: ignore[call-overload]
    return [] if spec is None else [*(spec.command or ()), *spec.args]


def sglang_uses_env(recipe: Recipe, role: str) -> bool:
    """An SGLang role started with ``--enable-lmcache`` that names no config file and no
    ``LMCACHE_MP_HOST`` of its own."""
    spec = recipe.roles.get(role)  # type: ignore[call-overload]
    if spec is None or recipe.engine.type != "sglang":
        return False
    argv = role_argv(recipe, role)
    if not any(a == SGLANG_FLAG or a.startswith(SGLANG_FLAG + "=") for a in argv):
        return False
    if any(a == SGLANG_CONFIG_FLAG or a.startswith(SGLANG_CONFIG_FLAG + "=") for a in argv):
        return False
    return SGLANG_HOST not in spec.env


# --------------------------------------------------------------------------- recipe-level


def roles_using(recipe: Recipe) -> list[str]:
    """The vLLM roles whose workers load ``lmcache-mp``, in the recipe's order."""
    if recipe.engine.type != "vllm":
        return []
    return [r for r in recipe.roles if recipe.role_connector(r) == CONNECTOR]


def implied(recipe: Recipe) -> list[ImpliedService]:
    """One server on every node of the roles that use ``lmcache-mp`` (all worker nodes when
    several roles do), unless a server is declared under any name."""
    roles = roles_using(recipe)
    if not roles:
        return []
    placement = roles[0] if len(roles) == 1 else "workers"
    return [
        ImpliedService(
            entry={"name": KIND, "type": KIND, "placement": {"node": placement}},
            reason=", ".join(f"{r} connector {CONNECTOR}" for r in roles),
            unless_type_declared=(KIND,),
            order=40,
        )
    ]


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """The hash seed: LMCache keys chunks by a hash of their tokens, and Python's ``hash``
    differs between processes unless ``PYTHONHASHSEED`` is the same in both."""
    servers = declared_servers(recipe)
    implied_here = bool(roles_using(recipe)) and not servers
    if not servers and not implied_here:
        return []
    seeds = {s.env.get(HASH_SEED) for s in servers} if servers else {None}
    out: list[Problem] = []
    for role, spec in recipe.roles.items():
        seed = spec.env.get(HASH_SEED)
        if seed is None or seed in seeds:
            continue
        if recipe.role_connector(role) != CONNECTOR and not sglang_uses_any(recipe, role):
            continue
        where = (
            f"services[{servers[0].name}]"
            if servers
            else f"a services entry `{{name: {KIND}, env: {{{HASH_SEED}: '{seed}'}}}}`"
        )
        out.append(
            Problem(
                ("roles", role, "env", HASH_SEED),
                f"the workers hash with {HASH_SEED}={seed} but the {KIND} service does not"
                " (services do not inherit the workers' env), so their cache keys will not"
                f" match: set {HASH_SEED}: '{seed}' in the env of {where}",
                warning=True,
            )
        )
    return out


def declared_servers(recipe: Recipe) -> list[ServiceSpec]:
    """Enabled entries that run an LMCache server: of its type, or named like the implied
    one without a type (which then takes the implied type)."""
    return [
        s
        for s in recipe.services
        if s.enabled and (s.type == KIND or (s.name == KIND and "type" not in s.model_fields_set))
    ]


def sglang_uses_any(recipe: Recipe, role: str) -> bool:
    """An SGLang role that talks to an LMCache server (however it learns the address)."""
    if recipe.engine.type != "sglang":
        return False
    return any(a == SGLANG_FLAG or a.startswith(SGLANG_FLAG + "=") for a in role_argv(recipe, role))
