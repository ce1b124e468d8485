"""``srt status``: a job directory as a table, while the job runs or after it ended."""

from __future__ import annotations

import os
import time
from typing import Any

from srt_services import procfs
from srt_services.jobdir.state import InstanceState
from srt_services.jobdir.view import JobView

#: Instance states that mean "should be running": shown as such only while it is.
LIVE_STATES = {"starting", "ready", "stopping"}


def status_rows(path: str) -> dict[str, Any]:
    """The status of the job in ``path`` as plain data (``srt status --json`` prints it)."""
    view = JobView.read(path)
    state = view.state
    result = view.result
    alive_orch = view.orchestrator_alive()
    now = time.time()
    instances = state.instances if state is not None else {}
    rows = [_row(view, step, inst, alive_orch, now) for step, inst in instances.items()]
    slurm: dict[str, Any] | None = None
    if view.slurm_job_id is not None:
        slurm = _slurm_status(view.slurm_job_id, rows)
        alive_orch = slurm["state"] == "RUNNING"
    cause = result.cause if result is not None and result.cause is not None else None
    if cause is None and state is not None:
        cause = state.cause
    return {
        "slurm": slurm,
        "job": (state.job_name if state else None) or (view.plan.job_name if view.plan else None),
        "job_dir": view.job.path,
        "status": (result.status if result else None)
        or (state.status if state else None)
        or "planned",
        "exit_code": result.exit_code if result else None,
        "orchestrator_alive": alive_orch,
        "orchestrator_pid": view.orchestrator_pid,
        "cause": cause.message if cause is not None else None,
        "instances": rows,
    }


def _row(
    view: JobView, step: str, inst: InstanceState, alive_orch: bool, now: float
) -> dict[str, Any]:
    pid = inst.pid
    running = pid is not None and procfs.same_process(pid, inst.start_ticks)
    uptime = now - inst.started if running and inst.started is not None else None
    state_name: str = inst.state
    if not running and state_name in LIVE_STATES and not alive_orch and pid:
        state_name = f"{state_name} (orchestrator gone)"
    return {
        "step": step,
        "unit": inst.unit,
        "node": inst.node,
        "state": state_name,
        "pid": pid,
        "running": running,
        "uptime": uptime,
        "attempt": inst.attempt,
        "restarts": inst.restarts,
        "exit_code": inst.exit_code,
        "readiness": inst.readiness,
        "log": os.path.join(view.job.path, inst.log),
    }


def _slurm_status(job_id: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The Slurm job's state and live steps; a row runs while its step is listed."""
    from srt_services.launch.slurm import control

    live = control.steps(job_id)
    for row in rows:
        row["slurm_step"] = live.get(row["step"])
        row["running"] = row["slurm_step"] is not None
    return {"job_id": job_id, "state": control.job_state(job_id), "steps": live}


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def render_status(data: dict[str, Any]) -> None:
    from rich.console import Console

    Console(soft_wrap=True).print(status_view(data))


def watch_status(path: str, period: float = 0.5) -> None:
    """Redraw the table until the job ends (its orchestrator is gone)."""
    from rich.console import Console
    from rich.live import Live

    console = Console()
    with Live(status_view(status_rows(path)), console=console, refresh_per_second=4) as live:
        while True:
            data = status_rows(path)
            live.update(status_view(data))
            if not data["orchestrator_alive"]:
                return
            time.sleep(period)


def status_view(data: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    head = f"job {data['job']}: {data['status']}"
    if data["exit_code"] is not None:
        head += f" (exit {data['exit_code']})"
    orch = "running" if data["orchestrator_alive"] else "not running"
    head += f"; orchestrator pid {data['orchestrator_pid']} {orch}"
    parts.append(Text(head))
    if data.get("slurm"):
        s = data["slurm"]
        state = s["state"] or "no longer listed"
        parts.append(Text(f"slurm job {s['job_id']}: {state}; {len(s['steps'])} step(s) running"))
    if data.get("cause"):
        parts.append(Text(f"cause: {data['cause']}"))
    table = Table(box=None, pad_edge=False)
    for col in ("step", "node", "state", "pid", "uptime", "restarts", "exit", "readiness", "log"):
        table.add_column(col, overflow="fold")
    for r in data["instances"]:
        table.add_row(
            r["step"],
            r["node"] or "",
            r["state"],
            str(r["pid"] or "-") + ("" if r["running"] or not r["pid"] else " (gone)"),
            _age(r["uptime"]),
            str(r["restarts"] or 0),
            "-" if r["exit_code"] is None else str(r["exit_code"]),
            r["readiness"] or "-",
            r["log"],
        )
    parts.append(table)
    return Group(*parts)
