"""The node agent's answers on its control socket: one request in, one JSON answer out.

The socket protocol itself (framing, size limit, file mode) is
:mod:`~oarbank_protocol.agent.control`; this is what each ``op`` does. A refusal is an
answer, not a dropped connection: ``{"ok": false, "error", "kind", "retryable"}``, where
``kind`` is the exception class, so a client can tell "no tokens now, try later"
(retryable) from "no such capability".
"""

from __future__ import annotations

from typing import Any, Protocol

from oarbank_protocol.errors import AdmissionRefused, OarbankError


class Agent(Protocol):
    """What the requests need of the node agent."""

    async def admit(self, request: dict[str, Any]) -> dict[str, Any]: ...
    def release(self, attempt: str) -> bool: ...
    def status(self) -> dict[str, Any]: ...
    async def doctor(self, reason: str = "requested") -> dict[str, Any]: ...
    def reset(self, capability: str) -> bool: ...


async def answer(agent: Agent, req: dict[str, Any]) -> dict[str, Any]:
    """Carry out one control request (see :mod:`~oarbank_protocol.agent.control`)."""
    op = req.get("op")
    try:
        if op == "admit":
            return {"ok": True, **(await agent.admit(req))}
        if op == "release":
            attempt = req.get("attempt_id")
            if not isinstance(attempt, str):
                raise AdmissionRefused("attempt_id (a string) is required")
            return {"ok": True, "released": agent.release(attempt)}
        if op == "status":
            return {"ok": True, **agent.status()}
        if op == "doctor":
            return {"ok": True, "capabilities": await agent.doctor("requested")}
        if op == "reset":
            capability = req.get("capability")
            if not isinstance(capability, str):
                raise AdmissionRefused("capability (module/service) is required")
            return {"ok": True, "reset": agent.reset(capability)}
        return {"ok": False, "error": f"unknown op {op!r}", "kind": "UsageError"}
    except (OarbankError, ValueError) as exc:
        return {
            "ok": False,
            "error": str(exc),
            "kind": type(exc).__name__,
            "retryable": bool(getattr(exc, "retryable", False)),
        }
