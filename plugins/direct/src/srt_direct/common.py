"""What the three engines share: options, the bases of srtctl's port formulas, the served
model name.

The formulas themselves (:func:`worker_slots`) are core's, shared with srt-dynamo (plugins
never import each other): both follow srtctl (``endpoints_to_processes``), so a recipe moved
between the engines keeps its ports.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
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
    WorkerSlots,
    config_value,
    worker_processes,
    worker_slots,
)

MODE_OF_ROLE = {"prefill": "prefill", "decode": "decode", "agg": "aggregated"}
SHORT = {"prefill": "prefill", "decode": "decode", "agg": "agg"}


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


def leaders(layout: Layout, bases: PortBases) -> Iterator[tuple[WorkerProcess, WorkerSlots]]:
    """Every worker's leader process with its slots (for a router that lists the workers)."""
    processes = worker_processes(layout)
    for proc, slots in zip(processes, worker_slots(processes, bases), strict=True):
        if proc.leader:
            yield proc, slots


def role_config(recipe: Recipe, role: str) -> dict[str, Any]:
    spec = recipe.roles.get(role)  # type: ignore[call-overload]
    return dict(spec.config) if spec is not None else {}


def served_model_name(recipe: Recipe) -> str:
    """``engine.served_model_name``; else the first ``served-model-name`` of the prefill, agg
    and decode configs (srtctl's order); else the model's last part."""
    if recipe.engine.served_model_name:
        return recipe.engine.served_model_name
    for role in ("prefill", "agg", "decode"):
        name = config_value(role_config(recipe, role), "served-model-name")
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
