"""``srt status``: a job directory as a table, while the job runs or after it ended."""

from __future__ import annotations

import os
import time
from typing import Any

from srt_services.launch import process
from srt_services.supervise.recovery import JobView


def status_rows(path: str) -> dict[str, Any]:
    view = JobView.read(path)
    state = view.state or {}
    result = view.result or {}
    alive_orch = view.orchestrator_alive()
    now = time.time()
    rows = []
    for step, inst in (state.get("instances") or {}).items():
        pid = inst.get("pid")
        running = False
        if isinstance(pid, int) and inst.get("start_ticks") is not None:
            running = process.alive(pid) and process.start_ticks(pid) == inst.get("start_ticks")
        started = inst.get("started")
        uptime = now - started if running and isinstance(started, (int, float)) else None
        state_name = inst.get("state", "?")
        if not running and state_name in {"starting", "ready", "stopping"} and not alive_orch:
            state_name = f"{state_name} (orchestrator gone)" if pid else state_name
        rows.append(
            {
                "step": step,
                "unit": inst.get("unit"),
                "node": inst.get("node"),
                "state": state_name,
                "pid": pid,
                "running": running,
                "uptime": uptime,
                "attempt": inst.get("attempt"),
                "restarts": inst.get("restarts"),
                "exit_code": inst.get("exit_code"),
                "readiness": inst.get("readiness"),
                "log": os.path.join(view.job.path, inst.get("log", "")),
            }
        )
    slurm: dict[str, Any] | None = None
    if view.slurm_job_id is not None:
        from srt_services.launch.slurm import control

        live = control.steps(view.slurm_job_id)
        slurm = {
            "job_id": view.slurm_job_id,
            "state": control.job_state(view.slurm_job_id),
            "steps": live,
        }
        for row in rows:
            row["slurm_step"] = live.get(row["step"])
            row["running"] = row["slurm_step"] is not None
        alive_orch = slurm["state"] == "RUNNING"
    return {
        "slurm": slurm,
        "job": state.get("job_name") or (view.plan or {}).get("job_name"),
        "job_dir": view.job.path,
        "status": result.get("status") or state.get("status") or "planned",
        "exit_code": result.get("exit_code"),
        "orchestrator_alive": alive_orch,
        "orchestrator_pid": (state.get("orchestrator") or {}).get("pid"),
        "cause": (result.get("cause") or state.get("cause") or {}).get("message"),
        "instances": rows,
    }


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
