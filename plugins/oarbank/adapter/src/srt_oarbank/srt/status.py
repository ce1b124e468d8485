"""The ``srt status`` section of a job's oarbank node agents: admissions and pool use.

Each ``oarbank`` service that takes admissions runs a node agent on its nodes; while the
job runs, its control socket answers ``status`` at once (the agent answers from memory),
so every refresh of ``srt status --watch`` asks it anew, with a short timeout. Once the job
ended there is no one to ask, and the section says so rather than show a stale picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from srt_services.extend import JobDirError, StatusSection, read_job

from srt_oarbank.srt.kind import agent_socket

#: ``srt status`` must not hang on an agent that is busy or stopped
ASK_TIMEOUT_S = 2.0


def sections(job_dir: str) -> list[StatusSection]:
    try:
        job = read_job(job_dir)
    except JobDirError:
        return []
    plan = job.plan
    if plan is None:
        return []
    lines: list[str] = []
    data: dict[str, Any] = {}
    for unit in plan.units:
        if unit.type != "oarbank" or not (unit.options or {}).get("admissions"):
            continue
        for inst in unit.instances:
            key = f"{unit.name}@{inst.node}"
            answer = _ask(Path(agent_socket(inst)), job.running)
            data[key] = answer
            lines += _describe(key, answer)
    if not data:
        return []
    return [StatusSection(title="oarbank admissions", lines=tuple(lines), data=data)]


def _ask(socket: Path, running: bool) -> dict[str, Any]:
    from oarbank_protocol.agent.control import request

    if not running:
        return {"ok": False, "error": "the job is not running (no agent to ask)"}
    if not socket.exists():
        return {"ok": False, "error": "the agent is not up (no control socket)"}
    try:
        return request(socket, {"op": "status"}, ASK_TIMEOUT_S)
    except (OSError, ValueError) as exc:
        return {"ok": False, "error": f"the agent does not answer: {exc}"}


def _describe(key: str, answer: dict[str, Any]) -> list[str]:
    if not answer.get("ok"):
        return [f"{key}: {answer.get('error')}"]
    out: list[str] = []
    memory = answer.get("memory") or {}
    budget = memory.get("budget_gb")
    charged = memory.get("charged_gb", 0)
    out.append(
        f"{key}: memory charged {charged:g} GB"
        + (f" of {budget:g} GB" if isinstance(budget, int | float) else "")
    )
    for module, report in sorted((answer.get("modules") or {}).items()):
        admissions = report.get("admissions") or []
        out.append(f"  {module}: admissions: {', '.join(admissions) or 'none'}")
        pools = report.get("pools") or {}
        reserved = pools.get("reserved") or {}
        for pool, capacity in sorted((pools.get("capacity") or {}).items()):
            out.append(f"  {module}/{pool}: {reserved.get(pool, 0)} of {capacity} token(s) held")
        for name, svc in sorted((report.get("services") or {}).items()):
            users = ", ".join(svc.get("users") or []) or "no users"
            reason = f" ({svc['reason']})" if svc.get("reason") else ""
            out.append(
                f"  {module}/{name} ({svc.get('lifecycle')}): {svc.get('state')}{reason}; {users}"
            )
    return out
