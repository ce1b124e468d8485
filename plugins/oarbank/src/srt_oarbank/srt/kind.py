"""The srt service kind ``oarbank``: one service of a protocol-1 module, run by our agent.

The instance srt launches is ``python -m srt_oarbank.agent`` for that one service: the agent
starts it through the module's executable (or adopts it if it already runs), restarts it
with backoff, and on SIGTERM stops it through the protocol and reaps its owned objects. So
srt's readiness is the protocol's ``ready`` (probe ``oarbank-ready``), srt's stop is the
protocol's ``stop`` plus reaping, and ``critical`` means what it means for any service.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import DefaultProbe, KindOptions, Problem, ServiceKind

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, Recipe, ServiceSpec

OPS = ("fingerprint", "start", "stop", "status", "ready", "list_owned", "destroy")


class OarbankOptions(KindOptions):
    bundle: str = Field(description="Module bundle directory (holds oarbank-module.json).")
    service: str = Field(description="Name of the service in the module's manifest.")
    settings: dict[str, Any] = Field(
        default_factory=dict, description="Module settings for this node (written as JSON)."
    )
    node_id: str = Field("{node}", description="OARBANK_NODE_ID (placeholders allowed).")
    timeouts: dict[str, float] = Field(
        default_factory=dict, description="Per-op timeout overrides in seconds (op: seconds)."
    )
    ready_timeout_seconds: float = Field(
        600.0, gt=0, description="How long srt waits for the protocol's ready."
    )


class OarbankKind(ServiceKind):
    name: ClassVar[str] = "oarbank"
    summary: ClassVar[str] = "A service of a protocol-1 module, run under srt's oarbank agent."
    readiness_summary: ClassVar[str] = "the protocol's ready op"
    Options: ClassVar[type[OarbankOptions]] = OarbankOptions
    default_start: ClassVar[str] = "before_workers"
    default_critical: ClassVar[bool] = True
    forbids_command: ClassVar[bool] = True
    #: the protocol's stop may take 120 s, then destroy --force 60 s
    default_stop_grace: ClassVar[float] = 190.0

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        from srt_oarbank.execution.bundle import load_bundle

        out: list[Problem] = []
        for op in options.timeouts:
            if op not in OPS:
                out.append(
                    Problem(("options", "timeouts", op), f"is not an operation ({', '.join(OPS)})")
                )
        path = Path(options.bundle)
        if not path.is_absolute():
            out.append(
                Problem(("options", "bundle"), "must be an absolute path (every node must find it)")
            )
            return out
        try:
            bundle = load_bundle(path)
            bundle.manifest.service(options.service)
        except Exception as exc:
            out.append(Problem(("options",), f"cannot use module bundle {options.bundle}: {exc}"))
        return out

    def command(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        argv = [
            sys.executable,
            "-m",
            "srt_oarbank.agent",
            "--bundle",
            options.bundle,
            "--service",
            options.service,
            "--node-id",
            options.node_id,
            "--data",
            "{work_dir}/data",
            "--state",
            "{work_dir}/agent-state.json",
            "--status-file",
            "{work_dir}/status.json",
        ]
        if options.settings:
            argv += ["--settings", "{work_dir}/settings.json"]
        for op, seconds in sorted(options.timeouts.items()):
            argv += ["--timeout", f"{op}={seconds:g}"]
        return argv

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        if not options.settings:
            return {}
        # JSON braces are not placeholders; escape ours so none of the settings is rendered
        return {
            "settings.json": json.dumps(options.settings, sort_keys=True)
            .replace("{", "{{")
            .replace("}", "}}")
        }

    def readiness(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> DefaultProbe:
        return DefaultProbe(
            "oarbank-ready",
            {
                "bundle": options.bundle,
                "service": options.service,
                "node_id": options.node_id,
                "data_dir": "{work_dir}/data",
                "settings": options.settings,
            },
            timeout=options.ready_timeout_seconds,
            interval=1.0,
        )
