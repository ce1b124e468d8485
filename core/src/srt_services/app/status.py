"""``srt status``'s data: a job directory's instances, while the job runs or after it ended.

How it reads as text is :mod:`srt_services.cli.status_views`; ``--json`` prints this as is.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from srt_services import procfs
from srt_services.contracts.plan import Plan
from srt_services.jobdir.state import InstanceState
from srt_services.jobdir.view import JobView

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet

#: Instance states that mean "should be running": shown as such only while it is.
LIVE_STATES = {"starting", "ready", "stopping"}


def status_rows(path: str, plugins: PluginSet | None = None) -> dict[str, Any]:
    """The status of the job in ``path`` as plain data (``srt status --json`` prints it);
    with ``plugins``, what they add (``srt_status_sections``) under ``sections``."""
    view = JobView.read(path)
    state = view.state
    result = view.result
    alive_orch = view.orchestrator_alive()
    now = time.time()
    instances = state.instances if state is not None else {}
    over = state is not None and state.finished
    plan = view.plan
    ports = {i.step: i.ports for u in plan.units for i in u.instances} if plan else {}
    rows = [
        _row(view, step, inst, alive_orch, now, over, ports=ports)
        for step, inst in instances.items()
    ]
    slurm: dict[str, Any] | None = None
    if view.slurm_job_id is not None:
        slurm = _slurm_status(view.slurm_job_id, rows, instances)
        alive_orch = slurm["state"] == "RUNNING"
    cause = result.cause if result is not None and result.cause is not None else None
    if cause is None and state is not None:
        cause = state.cause
    status: str = (
        (result.status if result else None) or (state.status if state else None) or "planned"
    )
    if status in {"running", "stopping"} and not alive_orch:
        status = "lost"  # never "running" about a job whose orchestrator is gone
    builds = state.builds if state is not None else {}
    rows += [_row(view, step, b, alive_orch, now, over, build=True) for step, b in builds.items()]
    return {
        "slurm": slurm,
        "job": (state.job_name if state else None) or (view.plan.job_name if view.plan else None),
        "job_dir": view.job.path,
        "status": status,
        "elsewhere": state.orchestrator.elsewhere() if state is not None else None,
        "exit_code": result.exit_code if result else None,
        "orchestrator_alive": alive_orch,
        "orchestrator_pid": view.orchestrator_pid,
        "cause": cause.message if cause is not None else None,
        "network": _network(plan),
        "instances": rows,
        "sections": plugin_sections(plugins, view.job.path) if plugins is not None else [],
    }


def _network(plan: Plan | None) -> dict[str, Any] | None:
    """A local job's network mode and, in namespaces mode, its bridge, node addresses and
    forwarded ports."""
    net = plan.local_network if plan is not None else None
    if net is None:
        return None
    out: dict[str, Any] = {"mode": net.mode, "why": net.why}
    if net.mode == "namespaces":
        out.update(
            bridge=net.bridge,
            subnet=net.subnet,
            addresses=dict(net.addresses),
            forwards=[dict(f) for f in net.forwards],
        )
    return out


def plugin_sections(plugins: PluginSet, path: str) -> list[dict[str, Any]]:
    """Each plugin section as data: its plugin, title, lines and data, or the error that
    cost it (one broken plugin never costs the status)."""
    out: list[dict[str, Any]] = []
    for label, section in plugins.status_sections(path):
        if isinstance(section, str):
            out.append({"plugin": label, "error": section})
            continue
        out.append(
            {
                "plugin": label,
                "title": section.title,
                "lines": list(section.lines),
                "data": dict(section.data),
            }
        )
    return out


def _row(
    view: JobView,
    step: str,
    inst: InstanceState,
    alive_orch: bool,
    now: float,
    over: bool,
    build: bool = False,
    ports: dict[str, list[int]] | None = None,
) -> dict[str, Any]:
    ports = ports or {}
    pid = inst.pid
    running = pid is not None and procfs.same_process(pid, inst.start_ticks)
    uptime = now - inst.started if running and inst.started is not None else None
    state_name: str = inst.state
    if build and state_name == "starting":
        state_name = "building"
    if over and state_name in LIVE_STATES:
        # the job ended (``srt stop`` cleaned up after its orchestrator, or the watchdog
        # of a detached run did): nothing of it runs on, whatever the last write said
        state_name = "stopped"
    elif not running and state_name in LIVE_STATES and not alive_orch and pid:
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
        #: why an ``unavailable`` instance is (its node lacks what it runs), or what a
        #: ``failed`` one said about why (a refused admission)
        "reason": inst.reason,
        "ports": list(ports.get(step, ())),
    }


def _slurm_status(
    job_id: str, rows: list[dict[str, Any]], instances: dict[str, InstanceState]
) -> dict[str, Any]:
    """The Slurm job's state and live steps. A row that is a step of its own runs while its
    step is listed; one its node's agent runs, while the agents' step is listed and the
    orchestrator last recorded it as running (its PID is on the node, not here)."""
    from srt_services.launch.slurm import control

    live = control.steps(job_id)
    for row in rows:
        inst = instances.get(row["step"])
        step_name = inst.extra.get("step_name") if inst is not None else None
        if inst is not None and inst.extra.get("via") == "agent":
            row["slurm_step"] = live.get(str(step_name))
            row["running"] = row["slurm_step"] is not None and inst.state in LIVE_STATES
        else:
            row["slurm_step"] = live.get(row["step"])
            row["running"] = row["slurm_step"] is not None
    return {"job_id": job_id, "state": control.job_state(job_id), "steps": live}
