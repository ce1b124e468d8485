"""The ``ray`` service kind: one Ray cluster over the nodes a service runs on.

The first instance runs the head (GCS, dashboard and job-submission API), every other
instance joins it; each is a ``ray start --block`` that srt supervises like any server.
RL and training pools submit their work to that cluster, so the job must not go on until
the cluster *exists*: readiness is per role (the head's dashboard answers, a member's log
says Ray runtime started), then per fleet (the head lists every member ALIVE), through the
kind's ``fleet_readiness`` and the ``ray-fleet`` probe.

Stopping: srt signals a whole process group (``srt run``) or a whole step (Slurm's
``scancel --signal``), so every one of Ray's ~20 processes gets the SIGTERM at once, the
GCS included. ``ray start --block`` would then ask the dead GCS to drain its node and wait
out Ray's 30 s drain budget; ``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S=0`` skips that drain
(a default here), and the node is gone in a few seconds. ``ray stop`` is never used: it
finds Ray processes machine-wide by name and would kill other users' clusters.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    DefaultProbe,
    Port,
    Problem,
    ServerKind,
    ServerOptions,
    url_host,
)

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Node, Recipe, ServiceSpec

KIND = "ray"
#: The key of this kind's binary in the site config's ``[binaries]`` table.
BINARY = "ray"
INSTALL_HINT = (
    "install Ray with its dashboard where the service runs (pip install 'ray[default]';"
    " into srt's own venv: pip install 'srt-ray[ray]'), or set options.binary, or"
    " [binaries] ray in the site config"
)
#: What ``ray start`` prints once its node runs (ANSI colour codes around it are fine).
READY_LINE = "Ray runtime started"
#: The range ``ray start`` gives its worker processes unless args say otherwise; a GCS or
#: dashboard port inside it makes ``ray start`` refuse to start.
WORKER_PORTS = range(10002, 20000)
WORKER_PORT_FLAGS = ("--min-worker-port", "--max-worker-port", "--worker-port-list")
#: Ray puts AF_UNIX sockets at <temp dir>/session_<date>_<time>_<usec>_<pid>/sockets/<name>
#: and Linux allows 107 bytes for such a path; this is what is left for the temp dir (with
#: room for a socket name longer than the longest seen, ``dash_MetricsHead``).
TEMP_DIR_MAX = 107 - len("/session_2026-12-01_13-42-12_524109_4194304/sockets/dash_SomeLongerHead")
#: Seconds between a member's checks that the head's GCS port is open.
HEAD_WAIT_INTERVAL = 0.2

#: ``ray start`` flags srt writes itself, with the option that sets each (``None``: srt's).
OWNED_FLAGS: dict[str, str | None] = {
    "--head": None,
    "--block": None,
    "--address": None,
    "--port": "port",
    "--node-ip-address": None,
    "--dashboard-host": None,
    "--dashboard-port": "dashboard_port",
    "--include-dashboard": None,
    "--num-gpus": "num_gpus",
    "--num-cpus": "num_cpus",
    "--temp-dir": None,
    "--disable-usage-stats": None,
}


class RayOptions(ServerOptions):
    """Knobs of the cluster; every other ``ray start`` flag goes in ``args``."""

    port: Port = Field(6379, description="The head's GCS port; members join <head>:<port>.")
    dashboard_port: Port = Field(
        8265,
        description="The head's dashboard and job-submission API (readiness, RAY_API_SERVER_ADDRESS).",
    )
    num_gpus: int | None = Field(
        None,
        ge=0,
        description="GPUs each node gives Ray (--num-gpus); CUDA_VISIBLE_DEVICES is set to match."
        " Default: resources.gpus_per_node.",
    )
    num_cpus: int | None = Field(
        None, ge=1, description="CPUs each node gives Ray (--num-cpus). Default: Ray counts them."
    )


def temp_dir(ctx: InstanceContext) -> str:
    """Ray's ``--temp-dir`` for one instance: node-local scratch that dies with the job.

    The instance's ``{local_dir}`` when it is short enough for Ray's socket paths, else a
    short name in the job's node-local directory (removed with it), unique per instance.
    """
    if len(ctx.local_dir.encode()) <= TEMP_DIR_MAX:
        return ctx.local_dir
    return f"{ctx.paths.local_job_dir}/ray-{zlib.crc32(ctx.step.encode()):08x}"


def gpu_count(options: RayOptions, ctx: InstanceContext) -> int:
    return options.num_gpus if options.num_gpus is not None else ctx.layout.gpus_per_node


def _quote(text: str) -> str:
    """``text`` literal inside double quotes in bash."""
    for ch in ("\\", '"', "`", "$"):
        text = text.replace(ch, "\\" + ch)
    return text


class RayKind(ServerKind):
    name: ClassVar[str] = KIND
    spec_departures: ClassVar[Mapping[str, str]] = {
        "readiness": "As specified (head dashboard, members' log, every member ALIVE); the"
        " timeout is 600 s, for a cluster of many nodes to form.",
    }
    summary: ClassVar[str] = (
        "One Ray cluster over the service's nodes: the head on the first, the rest join it."
    )
    readiness_summary: ClassVar[str] = (
        "head: http /api/version on 8265; members: log 'Ray runtime started';"
        " then every member ALIVE in the head's node list"
    )
    Options: ClassVar[type[RayOptions]] = RayOptions
    binary_name: ClassVar[str] = BINARY
    install_hint: ClassVar[str] = INSTALL_HINT

    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "workers"
    #: Ray owns whole nodes: a role's node set, the job's, or a pool (its own or another's).
    allowed_placements: ClassVar[frozenset[str] | None] = frozenset(
        {"head", "workers", "all", "pool"}
    )
    forbids_command: ClassVar[bool] = True
    default_stop_grace: ClassVar[float] = 30.0
    #: Ray's start on a busy node (imports, ~20 processes) has been seen to take minutes.
    default_readiness_timeout: ClassVar[float] = 600.0
    #: The probes back off to this: a head that takes 10 s is seen within half a second.
    default_readiness_interval: ClassVar[float] = 0.5

    # ------------------------------------------------------------------ ports and args

    def ports(self, options: Any) -> Mapping[str, int | None]:
        assert isinstance(options, RayOptions)
        return {"port": options.port, "dashboard_port": options.dashboard_port}

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, RayOptions)
        common = [
            f"--node-ip-address={ctx.node.ip}",
            f"--num-gpus={gpu_count(options, ctx)}",
            *([f"--num-cpus={options.num_cpus}"] if options.num_cpus is not None else []),
            f"--temp-dir={temp_dir(ctx)}",
            "--disable-usage-stats",
        ]
        if ctx.index == 0:
            return [
                "start",
                "--head",
                "--block",
                f"--port={options.port}",
                f"--dashboard-host={ctx.node.ip}",
                f"--dashboard-port={options.dashboard_port}",
                "--include-dashboard=true",
                *common,
            ]
        head = url_host(ctx.nodes[0].ip)
        return ["start", "--block", f"--address={head}:{options.port}", *common]

    def preamble(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> str | None:
        assert isinstance(options, RayOptions)
        parts = [super().preamble(spec, options, ctx)]
        tmp = temp_dir(ctx)
        if len(tmp.encode()) > TEMP_DIR_MAX:
            # even the short name does not fit: say so before Ray fails on a socket path
            parts.append(
                f'echo "srt-ray: the Ray temp dir {_quote(tmp)} is longer than the'
                f" {TEMP_DIR_MAX} bytes Ray's socket paths leave for it; set a shorter"
                ' [storage] node_local in the site config" >&2; exit 2'
            )
        if ctx.index > 0:
            # ray start --address gives up after a while; the head may take minutes
            host, port = ctx.nodes[0].ip, options.port
            parts.append(
                "srt_ray_tries=0\n"
                f"until timeout 2 bash -c ': >/dev/tcp/{host}/{port}' 2>/dev/null; do\n"
                "  [ $((srt_ray_tries % 50)) = 0 ] &&"
                f' echo "srt-ray: waiting for the Ray head\'s GCS at {host}:{port}"\n'
                "  srt_ray_tries=$((srt_ray_tries + 1))\n"
                f"  sleep {HEAD_WAIT_INTERVAL}\n"
                "done"
            )
        kept = [p for p in parts if p]
        return "\n".join(kept) if kept else None

    # ------------------------------------------------------------------ environment

    def default_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        assert isinstance(options, RayOptions)
        return {
            # what Ray hands out as GPUs must be the devices the node's processes see
            "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in range(gpu_count(options, ctx))),
            # a trainer offloading to host RAM trips Ray's memory killer on purpose
            "RAY_memory_monitor_refresh_ms": "0",
            # srt's SIGTERM reaches the GCS too: a drain would wait for it in vain (30 s)
            "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",
        }

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        return {"RAY_USAGE_STATS_ENABLED": "0"}

    def consumer_env(self, spec: ServiceSpec, options: Any, host: str | None) -> dict[str, str]:
        # RAY_ADDRESS is what ray.init() reads: the GCS address (Ray 2.x refuses an http://
        # one there). The job CLI and JobSubmissionClient() read RAY_API_SERVER_ADDRESS first.
        assert isinstance(options, RayOptions)
        if host is None:
            return {}
        return {
            "RAY_ADDRESS": f"{host}:{options.port}",
            "RAY_API_SERVER_ADDRESS": f"http://{host}:{options.dashboard_port}",
        }

    def service_facts(
        self, spec: ServiceSpec, options: Any, nodes: Sequence[Node]
    ) -> dict[str, str]:
        assert isinstance(options, RayOptions)
        host = url_host(nodes[0].ip)
        return {
            "ADDRESS": f"{host}:{options.port}",
            "DASHBOARD_URL": f"http://{host}:{options.dashboard_port}",
        }

    # ------------------------------------------------------------------ readiness

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        assert isinstance(options, RayOptions)
        if ctx.index == 0:
            return DefaultProbe(
                "http", {"port": options.dashboard_port, "path": "/api/version", "status": 200}
            )
        return DefaultProbe("log", {"pattern": re.escape(READY_LINE)})

    def fleet_readiness(
        self, spec: ServiceSpec, options: Any, instances: Sequence[InstanceContext]
    ) -> DefaultProbe:
        # a readiness block the recipe writes sets the gate's timing too: it is the only
        # place a recipe says how long the cluster may take
        assert isinstance(options, RayOptions)
        written = spec.readiness
        return DefaultProbe(
            "ray-fleet",
            {
                "port": options.dashboard_port,
                "members": [{"node": c.node.name, "ip": c.node.ip} for c in instances],
                # the head's ray start finished too (see srt_ray.fleet): a stop after the
                # gate then never waits for Ray's start-up
                "started": re.escape(READY_LINE),
            },
            timeout=written.timeout_seconds if written is not None else None,
            interval=written.interval_seconds if written is not None else None,
        )

    # ------------------------------------------------------------------ validation

    def validate_server(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, RayOptions)
        out: list[Problem] = []
        if spec.placement is not None and spec.placement.per not in (None, "node"):
            out.append(
                Problem(
                    ("placement", "per"),
                    f"type {KIND!r} runs one Ray node per node: Ray owns whole nodes, not a"
                    f" worker's GPU slice; drop per: {spec.placement.per}",
                )
            )
        gpus = recipe.resources.gpus_per_node
        if options.num_gpus is not None and options.num_gpus > gpus:
            out.append(
                Problem(
                    ("options", "num_gpus"),
                    f"is {options.num_gpus} but a node has {gpus} GPUs"
                    " (resources.gpus_per_node); Ray would hand out devices that do not exist",
                )
            )
        flags = [a.split("=", 1)[0] for a in spec.args]
        if not any(f in WORKER_PORT_FLAGS for f in flags):
            for key in ("port", "dashboard_port"):
                port = getattr(options, key)
                if port in WORKER_PORTS:
                    out.append(
                        Problem(
                            ("options", key),
                            f"{port} lies in the range ray start gives its worker processes"
                            f" ({WORKER_PORTS.start}-{WORKER_PORTS.stop - 1}) and is refused"
                            " there; pick a port outside it, or move that range with"
                            " --min-worker-port/--max-worker-port in args",
                        )
                    )
        for i, flag in enumerate(flags):
            if flag in OWNED_FLAGS:
                option = OWNED_FLAGS[flag]
                how = f"use options.{option}" if option else "srt writes it for every node"
                out.append(Problem(("args", i), f"{flag} is set by type {KIND!r}; {how}"))
        return out


# --------------------------------------------------------------------------- recipe-level


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """Rules across entries: one RAY_ADDRESS names one cluster."""
    entries = [(i, s) for i, s in enumerate(recipe.services) if s.type == KIND and s.enabled]
    out: list[Problem] = []
    if len(entries) > 1:
        last = entries[-1][1].name
        for i, spec in entries[:-1]:
            key = re.sub(r"[^A-Za-z0-9]", "_", spec.name).upper()
            out.append(
                Problem(
                    ("services", i, "type"),
                    f"is a second Ray cluster: RAY_ADDRESS and RAY_API_SERVER_ADDRESS name"
                    f" services[{last}] for every consumer; this cluster's clients must read"
                    f" SRT_SERVICE_{key}_ADDRESS / _DASHBOARD_URL (the benchmark gets them)",
                    warning=True,
                )
            )
    return out
