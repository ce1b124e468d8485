"""What the three engines share: options, srtctl's port formulas, the served model name.

srt-dynamo has its own copy of these rules (plugins never import each other); both follow
srtctl (``endpoints_to_processes``), so a recipe moved between the engines keeps its ports.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field
from srt_services.extend import (
    DefaultProbe,
    KindOptions,
    Layout,
    Port,
    Problem,
    Recipe,
    WorkerProcess,
    worker_processes,
)

MODE_OF_ROLE = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
SHORT = {"prefill": "prefill", "decode": "decode", "agg": "agg"}
HTTP_STRIDE = 32
VLLM_STRIDE = 50


class PortBases(KindOptions):
    """srtctl's port formulas (k: the process's position among the job's worker processes,
    s: a leader's slot on its node). Move a base only around a port the site reserves or to
    run two jobs on one machine."""

    http: Port = Field(6100, description="A leader's server port = http + 32*s.")
    bootstrap: Port = Field(
        7200, description="Prefill bootstrap = bootstrap + (prefill leaders before it on its host)."
    )
    kv_events: Port = Field(5200, description="KV-events publisher = kv_events + k.")
    nixl: Port = Field(5400, description="`VLLM_NIXL_SIDE_CHANNEL_PORT` = nixl + k.")
    nccl: Port = Field(17500, description="sglang `--nccl-port` = nccl + k.")
    dist_init: Port = Field(8300, description="sglang `--dist-init-addr <leader ip>:dist_init`.")
    vllm: Port = Field(20000, description="`VLLM_PORT` = vllm + 50*k.")


Timeout = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class CommonOptions(KindOptions):
    python: str | None = Field(
        None,
        description="The interpreter of `-m` modules. Default: `python3` inside a container,"
        " else the interpreter srt runs under (`{python}`).",
    )
    ports: PortBases = Field(default_factory=PortBases, description="Port formula bases.")
    readiness_timeout_seconds: Timeout = Field(
        1800.0,
        description="How long a worker and the frontend may take to become ready when the"
        " recipe writes no probe (srtctl's health check: 180 x 10 s).",
    )


@dataclass(frozen=True, slots=True)
class Slots:
    http_port: int | None
    kv_events_port: int
    nixl_port: int
    nccl_port: int
    vllm_port: int
    bootstrap_port: int | None


def host_of(ip: str, name: str) -> str:
    """Virtual nodes on the loopback range share one machine's ports (local mode)."""
    return "loopback" if ip.startswith("127.") else name


def slot_table(processes: Sequence[WorkerProcess], bases: PortBases) -> list[Slots]:
    out: list[Slots] = []
    leaders_on: dict[str, int] = {}
    prefill_on: dict[str, int] = {}
    bootstrap: int | None = None
    for proc in processes:
        worker = proc.worker
        if proc.leader:
            bootstrap = None
            if worker.role == "prefill":
                host = host_of(worker.nodes[0].ip, worker.nodes[0].name)
                bootstrap = bases.bootstrap + prefill_on.get(host, 0)
                prefill_on[host] = prefill_on.get(host, 0) + 1
        http = None
        if proc.leader:
            http = bases.http + HTTP_STRIDE * leaders_on.get(proc.node.name, 0)
            leaders_on[proc.node.name] = leaders_on.get(proc.node.name, 0) + 1
        k = proc.process_index
        out.append(
            Slots(
                http_port=http,
                kv_events_port=bases.kv_events + k,
                nixl_port=bases.nixl + k,
                nccl_port=bases.nccl + k,
                vllm_port=bases.vllm + VLLM_STRIDE * k,
                bootstrap_port=bootstrap,
            )
        )
    return out


def leaders(layout: Layout, bases: PortBases) -> Iterator[tuple[WorkerProcess, Slots]]:
    """Every worker's leader process with its slots (for a router that lists the workers)."""
    processes = worker_processes(layout)
    for proc, slots in zip(processes, slot_table(processes, bases), strict=True):
        if proc.leader:
            yield proc, slots


def lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    """A config value under either spelling (``served-model-name`` / ``served_model_name``)."""
    if not config:
        return None
    for candidate in (key, key.replace("-", "_"), key.replace("_", "-")):
        if candidate in config:
            return config[candidate]
    return None


def role_config(recipe: Recipe, role: str) -> dict[str, Any]:
    spec = recipe.roles.get(role)  # type: ignore[call-overload]
    return dict(spec.config) if spec is not None else {}


def served_model_name(recipe: Recipe) -> str:
    """``engine.served_model_name``; else the first ``served-model-name`` of the prefill, agg
    and decode configs (srtctl's order); else the model's last part."""
    if recipe.engine.served_model_name:
        return recipe.engine.served_model_name
    for role in ("prefill", "agg", "decode"):
        name = lookup(role_config(recipe, role), "served-model-name")
        if name:
            return str(name)
    model = (recipe.engine.model or "").rstrip("/")
    return posixpath.basename(model) or model


def interpreter(python: str | None, recipe: Recipe, role: str | None) -> str:
    if python:
        return python
    if role is None:
        own = recipe.frontend.container if recipe.frontend else None
    else:
        spec = recipe.roles.get(role)  # type: ignore[call-overload]
        own = spec.container if spec is not None else None
    return "python3" if (own or recipe.container) else "{python}"


def http_probe(
    port: int, path: str, timeout: float, body: dict[str, Any] | None = None
) -> DefaultProbe:
    config: dict[str, Any] = {"port": port, "path": path, "status": 200}
    if body is not None:
        config["body"] = body
    return DefaultProbe("http", config, timeout=timeout)


def model_problems(recipe: Recipe, engine: str) -> Iterator[Problem]:
    if any(spec.command is None for spec in recipe.roles.values()) and not recipe.engine.model:
        yield Problem(
            ("engine", "model"),
            f"is required: {engine} gives it to the workers it builds (a directory on every"
            " node or in the container, or a hub id)",
        )


def owned_problems(recipe: Recipe, owned: frozenset[str], engine: str) -> Iterator[Problem]:
    """A config key the engine sets itself: srt drops the recipe's copy, and says so."""
    for role, spec in recipe.roles.items():
        if spec.command is not None:
            continue
        for key in spec.config:
            name = key.replace("_", "-")
            if name in owned:
                yield Problem(
                    ("roles", role, "config", key),
                    f"is set by {engine} itself (--{name}); this copy is dropped",
                    warning=True,
                )


def disaggregated(recipe: Recipe) -> bool:
    return "prefill" in recipe.roles or "decode" in recipe.roles
