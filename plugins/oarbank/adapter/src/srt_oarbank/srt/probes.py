"""Readiness probes backed by protocol-1 executables.

``oarbank-ready`` asks a service's own ``ready`` op (the ``oarbank`` kind's default probe);
``oarbank-probe`` gates any srt service on a module *probe* (its fingerprint must say
healthy), e.g. "a JDK 17 is installed on this node" before a service that needs it starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    InstanceContext,
    Probe,
    ProbeResult,
    ProbeTarget,
    StrictModel,
    render,
)

from srt_oarbank.srt.sandbox_options import SandboxApproval


class ReadyConfig(StrictModel):
    bundle: str = Field(description="Module bundle directory.")
    service: str = Field(description="Service name in the manifest.")
    node_id: str = Field("{node}", description="OARBANK_NODE_ID.")
    data_dir: str = Field("{work_dir}/data", description="Module data dir (the agent's).")
    settings: dict[str, Any] = Field(default_factory=dict, description="Module settings.")
    timeouts: dict[str, float] = Field(
        default_factory=dict, description="Per-op timeout overrides (op: seconds)."
    )
    status_file: str | None = Field(
        None,
        description="The agent's status file (the `oarbank` kind's): ready waits for the agent "
        "to be up and to say ready, then asks the module.",
    )
    agent_data: bool = Field(
        False,
        description="The data dir is an oarbank agent's (the `oarbank` kind's): leave its "
        "settings, tools and limits files as the agent wrote them.",
    )
    tools: dict[str, Any] = Field(
        default_factory=dict, description="Granted host tools (a sandbox binds these in)."
    )
    sandbox: SandboxApproval = Field(
        default_factory=SandboxApproval, description="The site's sandbox approvals."
    )


class ProbeConfig(StrictModel):
    bundle: str = Field(description="Module bundle directory.")
    probe: str = Field(description="Probe name in the manifest (`probes[].name`).")
    node_id: str = Field("{node}", description="OARBANK_NODE_ID.")
    data_dir: str = Field("{work_dir}/oarbank-probe", description="Data dir for the probe.")
    settings: dict[str, Any] = Field(default_factory=dict, description="Module settings.")
    tools: dict[str, Any] = Field(
        default_factory=dict, description="Granted host tools (a sandbox binds these in)."
    )
    sandbox: SandboxApproval = Field(
        default_factory=SandboxApproval, description="The site's sandbox approvals."
    )


class AgentConfig(StrictModel):
    socket: str = Field(description="The node agent's control socket (placeholders allowed).")


def _plan(config: Any, ctx: InstanceContext) -> dict[str, Any]:
    data: dict[str, Any] = config.model_dump(mode="json")
    for key in ("node_id", "data_dir", "status_file", "socket"):
        if data.get(key) is not None:
            data[key] = render(data[key], ctx.values)
    return data


def agent_state(path: str) -> ProbeResult | None:
    """Not ready while the agent has not started or does not say ready (None: it does).

    Before the agent has written its status file it has not prepared the module's data
    directory (settings, tools and limits files) either, so asking the module then would
    hand it a half-made environment; and while the agent is restarting or backing off, its
    reason says more than the module's ``ready``.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return ProbeResult(False, "waiting for the oarbank agent to start")
    if not isinstance(doc, dict):
        return ProbeResult(False, "the oarbank agent's status file is not an object")
    if doc.get("state") != "ready":
        return ProbeResult(False, f"agent: {doc.get('state')}: {doc.get('reason') or '-'}")
    return None


class OarbankReadyProbe(Probe):
    name: ClassVar[str] = "oarbank-ready"
    summary: ClassVar[str] = "The protocol's `ready` op of a module service answers ready."
    Config: ClassVar[type[ReadyConfig]] = ReadyConfig
    instance_scoped: ClassVar[bool] = True

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        return _plan(config, ctx)

    def describe(self, planned: dict[str, Any]) -> str:
        return f"oarbank ready of {planned['service']} in {planned['bundle']}"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        from srt_oarbank.srt.readiness import service_ready

        cfg = target.config
        if cfg.get("status_file"):
            waiting = agent_state(cfg["status_file"])
            if waiting is not None:
                return waiting
        Path(cfg["data_dir"]).mkdir(parents=True, exist_ok=True)
        got = await service_ready(
            Path(cfg["bundle"]),
            cfg["service"],
            node_id=cfg["node_id"],
            data_dir=Path(cfg["data_dir"]),
            settings=cfg.get("settings") or None,
            timeouts=cfg.get("timeouts") or None,
            write_files=not cfg.get("agent_data", False),
            tools=cfg.get("tools") or None,
            site=SandboxApproval.model_validate(cfg.get("sandbox") or {}).site(),
        )
        return ProbeResult(got.ready, got.detail)


class OarbankProbe(Probe):
    name: ClassVar[str] = "oarbank-probe"
    summary: ClassVar[str] = "A module probe's fingerprint reports healthy."
    Config: ClassVar[type[ProbeConfig]] = ProbeConfig
    instance_scoped: ClassVar[bool] = True

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        return _plan(config, ctx)

    def describe(self, planned: dict[str, Any]) -> str:
        return f"oarbank probe {planned['probe']} of {planned['bundle']} healthy"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        from srt_oarbank.srt.readiness import probe_ready

        cfg = target.config
        Path(cfg["data_dir"]).mkdir(parents=True, exist_ok=True)
        got = await probe_ready(
            Path(cfg["bundle"]),
            cfg["probe"],
            node_id=cfg["node_id"],
            data_dir=Path(cfg["data_dir"]),
            settings=cfg["settings"] or None,
            tools=cfg.get("tools") or None,
            site=SandboxApproval.model_validate(cfg.get("sandbox") or {}).site(),
        )
        return ProbeResult(got.ready, got.detail)


class OarbankAgentProbe(Probe):
    """The ``oarbank`` kind's readiness with ``admissions``: the node agent answers.

    It starts nothing for an on_demand service until an admission asks, so the module's
    own ``ready`` says nothing about the agent being there for the units that use it;
    its control socket answering ``status`` does."""

    name: ClassVar[str] = "oarbank-agent"
    summary: ClassVar[str] = "An oarbank node agent answers on its control socket."
    Config: ClassVar[type[AgentConfig]] = AgentConfig
    instance_scoped: ClassVar[bool] = True

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        return _plan(config, ctx)

    def describe(self, planned: dict[str, Any]) -> str:
        return f"oarbank agent answers on {planned['socket']}"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        import asyncio

        from oarbank_protocol.agent.control import request

        path = Path(target.config["socket"])
        if not path.exists():
            return ProbeResult(False, f"waiting for the oarbank agent's socket {path}")
        try:
            answer = await asyncio.to_thread(
                request, path, {"op": "status"}, max(attempt_timeout, 1.0)
            )
        except (OSError, ValueError) as exc:
            return ProbeResult(False, f"the oarbank agent does not answer: {exc}")
        if not answer.get("ok"):
            return ProbeResult(False, f"the oarbank agent says: {answer.get('error')}")
        return ProbeResult(True, "the oarbank agent answers")
