"""The ``gms`` service kind: NVIDIA's GPU Memory Service for shadow engine recovery.

With ``engine.failover: true`` an engine worker loads its weights through a GPU Memory
Service (GMS) server per GPU: the memory outlives the engine process, so a shadow engine
on the same GPUs takes over in seconds when the active one dies (they elect the active one
with a flock on a shared lock file). The servers must run before the worker starts, in
that worker's device view, so the kind is per worker (``placement.per: worker``): one
instance per engine worker (per node of a worker wider than a node), which runs a small
supervisor (:mod:`srt_gms.supervisor`, written into the instance's work directory) that
starts ``python3 -m gpu_memory_service --device k`` for each of the worker's GPUs.

Each worker's sockets and lock file live in its own directory under the job's node-local
directory: ``{local_job_dir}/gms/<role>_<index>`` (``..._<node>`` for a worker wider than a
node, whose nodes are virtual nodes of one machine under ``srt run``). The servers get it as
``GMS_SOCKET_DIR``; the worker's engines get ``GMS_SOCKET_DIR`` and ``FAILOVER_LOCK_PATH``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import DefaultProbe, ImpliedService, KindOptions, Problem, ServiceKind

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Recipe, ServiceSpec

KIND = "gms"
SUPERVISOR = "gms_supervisor.py"
LOCK_FILE = "failover.lock"
READY = "GMS ready:"
#: Start-up budget of the servers when the recipe writes no readiness; srt's own probe
#: waits longer, so the supervisor's message (how many sockets appeared) is the one seen.
STARTUP_SECONDS = 120.0
PROBE_SLACK_SECONDS = 30.0
#: Placements whose workers are every role's.
EVERY_ROLE = frozenset({"workers"})
_MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class GmsOptions(KindOptions):
    """What runs the servers; the devices, directory and deadline come from the job."""

    python: str = Field(
        "python3", description="Interpreter of the supervisor and the servers (job's PATH)."
    )
    module: str = Field(
        "gpu_memory_service",
        description="Module each server runs (`-m`), with `--device k` and the recipe's args.",
    )
    sockets_per_device: int = Field(
        2, ge=1, description="Sockets a server creates (GMS: `weights` and `kv_cache`)."
    )


#: ``{name}`` in a file a kind writes is a placeholder; the supervisor's f-strings are not.
_BRACED = re.compile(r"(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*)\}")


@cache
def supervisor_source() -> str:
    """The supervisor's source, with every ``{name}`` escaped so srt writes it verbatim."""
    text = resources.files("srt_gms").joinpath("supervisor.py").read_text(encoding="utf-8")
    return _BRACED.sub(r"{{\1}}", text)


def socket_dir(wide: bool) -> str:
    """The worker's GMS directory, as placeholders (rendered per instance and per worker)."""
    base = "{local_job_dir}/gms/{worker_role}_{worker_index}"
    return base + "_{node}" if wide else base


def startup_seconds(spec: ServiceSpec) -> float:
    """The servers' start-up budget: ``readiness.timeout_seconds`` less a margin (a tenth,
    at least 1 s and at most 5 s, never more than half), so that the supervisor says how
    many sockets appeared before srt's probe gives up on it; without a readiness block,
    120 s (the probe waits 30 s longer)."""
    if spec.readiness is not None and spec.readiness.timeout_seconds is not None:
        written = spec.readiness.timeout_seconds
        return written - min(5.0, max(1.0, written / 10), written / 2)
    return STARTUP_SECONDS


def _covers(spec: ServiceSpec, role: str) -> bool:
    where = spec.placement.node if spec.placement and spec.placement.node else "workers"
    return where in EVERY_ROLE or where == role


def _wide(recipe: Recipe, role: str) -> bool:
    spec = recipe.roles.get(role)  # type: ignore[call-overload]
    gpn = recipe.resources.gpus_per_node
    return spec is not None and (spec.gpus_per_worker or gpn) > gpn


class GmsKind(ServiceKind):
    name: ClassVar[str] = KIND
    implied_by_summary: ClassVar[str] = "engine.failover (one per worker)"
    command_summary: ClassVar[str] = (
        "a bash supervisor running `python3 -m gpu_memory_service --device k` per GPU"
    )
    spec_departures: ClassVar[Mapping[str, str]] = {
        "implied by": "`engine.failover` implies it for every engine's workers, SGLang's"
        " too; the specification speaks of vLLM workers only.",
        "readiness": "The log line `GMS ready:` as specified; the timeout is 150 s (the"
        " servers' 120 s start-up budget plus the supervisor's slack to report).",
    }
    summary: ClassVar[str] = (
        "GPU Memory Service per engine worker (engine.failover): one server per GPU."
    )
    readiness_summary: ClassVar[str] = f"log '{READY}'"
    Options: ClassVar[type[GmsOptions]] = GmsOptions

    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "workers"
    default_per: ClassVar[str] = "worker"
    forbids_command: ClassVar[bool] = True
    default_readiness_timeout: ClassVar[float] = STARTUP_SECONDS + PROBE_SLACK_SECONDS
    default_readiness_interval: ClassVar[float] = 1.0

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, GmsOptions)
        out: list[Problem] = []
        if spec.placement is not None and spec.placement.per not in (None, "worker"):
            out.append(
                Problem(
                    ("placement", "per"),
                    f"type {KIND!r} runs one instance per worker in that worker's device view;"
                    " set placement.per: worker",
                )
            )
        if not recipe.engine.failover:
            out.append(
                Problem(
                    ("type",),
                    f"type {KIND!r} needs engine.failover: true (shadow engine recovery is what"
                    " the engines load their weights through GMS for)",
                )
            )
        if not options.python.strip():
            out.append(Problem(("options", "python"), "must not be blank"))
        if not _MODULE_RE.match(options.module):
            out.append(
                Problem(
                    ("options", "module"),
                    f"must be a module name (`pkg.mod`), got {options.module!r}",
                )
            )
        return out

    def command(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, GmsOptions)
        worker = ctx.worker
        assert worker is not None, "gms instances are per worker"
        return [
            options.python,
            f"{{work_dir}}/{SUPERVISOR}",
            "--dir",
            socket_dir(len(worker.nodes) > 1),
            "--devices",
            str(len(worker.gpus)),
            "--timeout",
            f"{startup_seconds(spec):g}",
            "--sockets-per-device",
            str(options.sockets_per_device),
            "--python",
            options.python,
            "--module",
            options.module,
            "--",  # the recipe's args follow: each server gets them
        ]

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        return {SUPERVISOR: supervisor_source()}

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        wide = ctx.worker is not None and len(ctx.worker.nodes) > 1
        return {"GMS_SOCKET_DIR": socket_dir(wide)}

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        return DefaultProbe(
            "log",
            {"pattern": re.escape(READY)},
            timeout=startup_seconds(spec) + PROBE_SLACK_SECONDS,
        )

    def worker_env(
        self, spec: ServiceSpec, options: Any, role: str, recipe: Recipe
    ) -> dict[str, str]:
        """Where the worker's engines find their memory service and their failover lock."""
        if not _covers(spec, role):
            return {}
        directory = socket_dir(_wide(recipe, role))
        return {"GMS_SOCKET_DIR": directory, "FAILOVER_LOCK_PATH": f"{directory}/{LOCK_FILE}"}


# --------------------------------------------------------------------------- recipe-level


def implied(recipe: Recipe) -> list[ImpliedService]:
    """Shadow engine recovery needs a memory service under every worker."""
    if not recipe.engine.failover:
        return []
    return [
        ImpliedService(
            entry={"name": KIND, "type": KIND, "placement": {"node": "workers", "per": "worker"}},
            reason="engine.failover",
            # a declared gms under another name serves the same workers' directories
            unless_type_declared=(KIND,),
            order=30,
        )
    ]


def recipe_problems(recipe: Recipe) -> list[Problem]:
    """Two memory services for one worker would share (and fight over) its directory."""
    out: list[Problem] = []
    seen: list[tuple[str, str]] = []
    for i, spec in enumerate(recipe.services):
        is_gms = spec.type == KIND or (spec.name == KIND and "type" not in spec.model_fields_set)
        if not (is_gms and spec.enabled):
            continue
        where = spec.placement.node if spec.placement and spec.placement.node else "workers"
        for name, other in seen:
            if "workers" in (where, other) or where == other:
                out.append(
                    Problem(
                        ("services", i, "placement"),
                        f"services[{name}] already runs GMS for these workers ({other}); one"
                        " worker has one memory service: give them disjoint roles",
                    )
                )
                break
        seen.append((spec.name, where))
    return out
