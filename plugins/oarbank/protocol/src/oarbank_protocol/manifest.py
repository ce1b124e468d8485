"""The module manifest (``oarbank-module.json``): its ``services[]`` and ``probes[]`` entries.

Unlike documents printed by executables, the manifest is authored once and validated before
anything runs, so unknown keys and loose types are errors: a misspelled ``idle_timout_s`` must
not silently fall back to a default. Numbers the spec leaves open follow the fault matrix's
"numbers to adopt" (restart backoff 10 s → 300 s, doubling, up to 25 % jitter, reset after
2 x max, ``max_failures`` counted within a window); the backoff itself is
:mod:`oarbank_protocol.lifecycle.backoff`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from oarbank_protocol.errors import ManifestError
from oarbank_protocol.names import Name

MANIFEST_FILE = "oarbank-module.json"

Lifecycle = Literal["on_demand", "always", "manual"]
OpName = Literal["fingerprint", "start", "stop", "status", "ready", "list_owned", "destroy"]
OPS: tuple[OpName, ...] = (
    "fingerprint",
    "start",
    "stop",
    "status",
    "ready",
    "list_owned",
    "destroy",
)


def _check_argv_item(value: str) -> str:
    if not value:
        raise ValueError("exec entries must not be empty")
    if "\x00" in value:
        raise ValueError("exec entries must not contain NUL")
    return value


ArgvItem = Annotated[str, AfterValidator(_check_argv_item)]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class RestartSpec(StrictModel):
    """When and how often a failed service is started again."""

    backoff_initial_s: PositiveFloat = 10.0
    backoff_max_s: PositiveFloat = 300.0
    jitter: float = Field(
        0.25, ge=0.0, le=1.0, description="Up to this fraction of the delay is added at random."
    )
    max_failures: PositiveInt = 5
    window_s: PositiveFloat = Field(
        600.0, description="max_failures counts only failures this recent (Nomad interval)."
    )
    reset_after_s: PositiveFloat | None = Field(
        None, description="Running this long resets the backoff; default 2 x backoff_max_s."
    )

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError("backoff_max_s must be >= backoff_initial_s")
        return self

    @property
    def reset_after(self) -> float:
        return self.reset_after_s if self.reset_after_s is not None else 2 * self.backoff_max_s


class OpTimeouts(StrictModel):
    """Per-op timeout overrides in seconds; unset ones use the spec's table."""

    fingerprint: PositiveFloat | None = None
    stop: PositiveFloat | None = None
    status: PositiveFloat | None = None
    ready: PositiveFloat | None = None
    list_owned: PositiveFloat | None = None
    destroy: PositiveFloat | None = None


class ServiceSpec(StrictModel):
    """One ``services[]`` entry."""

    name: Name
    exec: list[ArgvItem] = Field(min_length=1, description="argv prefix; the op is appended.")
    lifecycle: Lifecycle = "on_demand"
    idle_timeout_s: NonNegativeFloat = 300.0
    start_timeout_s: PositiveFloat = 120.0
    ready_timeout_s: PositiveFloat = Field(
        600.0, description="Deadline for ready after start (separate from liveness)."
    )
    ready_poll_s: PositiveFloat = 1.0
    status_period_s: PositiveFloat = Field(10.0, description="Liveness check while running.")
    fingerprint_period_s: PositiveFloat = 30.0
    timeouts: OpTimeouts = Field(default_factory=OpTimeouts)
    restart: RestartSpec = Field(default_factory=RestartSpec)
    pools: list[Name] = Field(default_factory=list, description="Pools it can provide tokens of.")
    reserves_host_memory: bool = False
    yieldable: bool = False
    freeze_ok: bool = False
    platforms: list[str] = Field(default_factory=list, description="Empty means everywhere.")

    @model_validator(mode="after")
    def _unique_pools(self) -> Self:
        if len(set(self.pools)) != len(self.pools):
            raise ValueError("pools must not repeat")
        return self

    def op_timeout(self, op: str) -> float | None:
        """The manifest's timeout for ``op``, or None for the spec default."""
        if op == "start":
            return self.start_timeout_s
        value = getattr(self.timeouts, op, None)
        return value if isinstance(value, float) else None


class ProbeSpec(StrictModel):
    """One ``probes[]`` entry: an executable that implements ``fingerprint`` only."""

    name: Name = Field(description="The capability this probe establishes.")
    exec: list[ArgvItem] = Field(min_length=1)
    period_s: PositiveFloat = 30.0
    timeout_s: PositiveFloat = 5.0
    failure_threshold: PositiveInt = 3
    success_threshold: PositiveInt = 1
    platforms: list[str] = Field(default_factory=list)


def _check_absolute(value: str) -> str:
    if not value.startswith("/") or "\x00" in value:
        raise ValueError("a granted path must be absolute (and contain no NUL)")
    return value


class PathGrant(StrictModel):
    """A host path the module needs inside its sandbox."""

    path: Annotated[str, AfterValidator(_check_absolute)]
    write: bool = Field(False, description="Bound read-write; read-only otherwise.")


class ContainerSpec(StrictModel):
    """A container the module's services may ask the agent's broker for (by ``name``).

    The module chooses among these and nothing else: the image, the command and the
    network are the manifest's, so what a confined module can have run is what its
    manifest (which the site reviews) says.
    """

    name: Name
    image: str = Field(min_length=1, description="A local image (the broker pulls nothing).")
    argv: list[ArgvItem] = Field(
        default_factory=list, description="Command (default: the image's)."
    )
    network: Literal["none", "host"] = Field(
        "none", description="`none`: its own empty network; `host`: the node's (loopback)."
    )


class SandboxSpec(StrictModel):
    """``sandbox``: what the module's services and probes need beyond their bundle and data.

    A module that declares this table runs confined (bubblewrap): the bundle read-only, its
    data directory read-write, the system's ``/usr`` and ``/etc`` read-only, and only these
    grants, each of which the site must approve before anything starts.
    """

    paths: list[PathGrant] = Field(default_factory=list)
    network: bool = Field(False, description="Share the host's network; a new empty one otherwise.")
    tools: list[Name] = Field(
        default_factory=list, description="Host tools (names in the tools file) bound in read-only."
    )
    containers: list[ContainerSpec] = Field(
        default_factory=list,
        description="Containers the agent's broker starts on the module's request "
        "(OARBANK_BROKER_SOCKET); the module cannot start containers itself.",
    )

    @model_validator(mode="after")
    def _unique_containers(self) -> Self:
        names = [c.name for c in self.containers]
        if len(set(names)) != len(names):
            raise ValueError("containers[].name must not repeat")
        return self


class ModuleManifest(StrictModel):
    """``oarbank-module.json`` at the bundle root."""

    name: Name
    version: str | None = None
    protocol: Literal[1] = 1
    services: list[ServiceSpec] = Field(default_factory=list)
    probes: list[ProbeSpec] = Field(default_factory=list)
    sandbox: SandboxSpec | None = None

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        seen: set[str] = set()
        entries: list[ServiceSpec | ProbeSpec] = [*self.services, *self.probes]
        for entry in entries:
            if entry.name in seen:
                raise ValueError(f"duplicate service or probe name {entry.name!r}")
            seen.add(entry.name)
        return self

    def service(self, name: str) -> ServiceSpec:
        for spec in self.services:
            if spec.name == name:
                return spec
        known = ", ".join(s.name for s in self.services) or "none"
        raise ManifestError(f"module {self.name!r} has no service {name!r} (services: {known})")

    def probe(self, name: str) -> ProbeSpec:
        for spec in self.probes:
            if spec.name == name:
                return spec
        known = ", ".join(p.name for p in self.probes) or "none"
        raise ManifestError(f"module {self.name!r} has no probe {name!r} (probes: {known})")


def load_manifest(path: Path) -> ModuleManifest:
    """Read and validate a manifest file; every problem becomes one :class:`ManifestError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ManifestError(f"manifest {path} is not UTF-8") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"manifest {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return parse_manifest(data, source=str(path))


def parse_manifest(data: object, *, source: str = "manifest") -> ModuleManifest:
    try:
        return ModuleManifest.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "<root>"
            lines.append(f"  {loc}: {err['msg']}")
        raise ManifestError(f"{source} is invalid:\n" + "\n".join(lines)) from None
