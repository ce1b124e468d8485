"""Acting on a job directory from another process: status, stop, and leftovers.

The job directory's ``state.json`` names the orchestrator (PID plus start time) and the
job's cookie. If the orchestrator lives, ``srt stop`` asks it to stop (SIGTERM) and waits;
it alone knows the tiers and graces. If it died (SIGKILL, OOM, a crashed node), its
leftovers are found by cookie, confirmed by start time (never by PID alone: PIDs are
reused), and stopped tier by tier from here.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from srt_services.launch import process
from srt_services.plan.model import TIER_OF_PHASE
from srt_services.supervise.jobdir import JobDir, JobDirError, atomic_write


@dataclass(slots=True)
class JobView:
    job: JobDir
    state: dict[str, Any] | None
    plan: dict[str, Any] | None
    result: dict[str, Any] | None

    @classmethod
    def read(cls, path: str) -> JobView:
        job = JobDir(os.path.abspath(path))
        if not os.path.isdir(job.path):
            raise JobDirError(f"{path} is not a directory")
        state = job.read_json("state.json")
        plan = job.read_json("plan.json")
        if state is None and plan is None and job.read_json("job.json") is None:
            raise JobDirError(f"{path} is not an srt job directory (no state.json or plan.json)")
        return cls(job, state, plan, job.read_json("result.json"))

    @property
    def cookie(self) -> str | None:
        return (self.state or {}).get("cookie")

    @property
    def slurm_job_id(self) -> str | None:
        """The Slurm job of a job directory made by ``srt apply`` (``None`` for local jobs)."""
        submitted = self.job.read_json("job.json") or {}
        if submitted.get("launcher") == "slurm":
            return str(submitted["job_id"])
        if (self.state or {}).get("launcher") == "slurm":
            return str(self.state["job_id"])  # type: ignore[index]
        return None

    def orchestrator_alive(self) -> bool:
        orch = (self.state or {}).get("orchestrator") or {}
        pid, ticks = orch.get("pid"), orch.get("start_ticks")
        if not isinstance(pid, int) or pid <= 0:
            return False
        if self.state and self.state.get("status") in {"finished", "failed", "stopped"}:
            return False
        return process.alive(pid) and process.start_ticks(pid) == ticks

    def tiers(self) -> dict[str, int]:
        """step -> shutdown tier, from the plan."""
        out: dict[str, int] = {}
        for unit in (self.plan or {}).get("units", []):
            tier = unit.get("tier", TIER_OF_PHASE.get(unit.get("phase", ""), 0))
            for inst in unit.get("instances", []):
                out[inst["step"]] = tier
        return out

    def grace(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for unit in (self.plan or {}).get("units", []):
            for inst in unit.get("instances", []):
                out[inst["step"]] = float(unit.get("stop_grace", 30.0))
        return out

    def not_before_ticks(self) -> int | None:
        orch = (self.state or {}).get("orchestrator") or {}
        ticks = orch.get("start_ticks")
        return ticks if isinstance(ticks, int) else None

    def leftovers(self) -> list[tuple[int, str | None]]:
        if not self.cookie:
            return []
        return process.pids_with_cookie(self.cookie, self.not_before_ticks())


def wait_gone(pids: list[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    left = [p for p in pids if process.alive(p)]
    while left and time.monotonic() < deadline:
        time.sleep(0.02)
        left = [p for p in left if process.alive(p)]
    return left


def stop_leftovers(view: JobView, grace: float | None = None, log: Any = print) -> list[str]:
    """Stop every process of a job whose orchestrator is gone; return what survived."""
    found = view.leftovers()
    if not found:
        return []
    tiers = view.tiers()
    graces = view.grace()
    by_tier: dict[int, list[tuple[int, str | None]]] = {}
    for pid, step in found:
        by_tier.setdefault(tiers.get(step or "", 0), []).append((pid, step))
    survivors: list[str] = []
    for tier in sorted(by_tier):
        members = by_tier[tier]
        log(f"stopping tier {tier}: " + ", ".join(f"{s or '?'} (pid {p})" for p, s in members))
        for pid, _ in members:
            process.signal_pid(pid, signal.SIGTERM)
            process.signal_pid(pid, signal.SIGCONT)
        wait = (
            grace
            if grace is not None
            else max((graces.get(s or "", 30.0) for _, s in members), default=30.0)
        )
        left = wait_gone([p for p, _ in members], wait)
        for pid in left:
            log(f"pid {pid} did not exit {wait:g}s after SIGTERM; sending SIGKILL")
            process.signal_pid(pid, signal.SIGKILL)
        for pid in wait_gone(left, 5.0):
            survivors.append(f"pid {pid} (state {process.proc_state(pid)})")
    return survivors


def mark_stopped(view: JobView, note: str) -> None:
    state = dict(view.state or {})
    state["status"] = "stopped"
    state["stopped_by"] = note
    import orjson

    atomic_write(view.job.file("state.json"), orjson.dumps(state, option=orjson.OPT_INDENT_2))


def stop_job(path: str, now: bool = False, timeout: float | None = None, log: Any = print) -> int:
    """``srt stop``: returns 0 when nothing of the job is left running."""
    view = JobView.read(path)
    if view.slurm_job_id is not None:
        from srt_services.launch.slurm import control

        job_id = view.slurm_job_id
        log(f"stopping Slurm job {job_id}")
        gone = control.stop(job_id, timeout if timeout is not None else 60.0, now=now, log=log)
        if not gone:
            log(f"Slurm job {job_id} is still listed after scancel")
            return 1
        log("nothing of the job is running")
        return 0
    if view.orchestrator_alive():
        pid = view.state["orchestrator"]["pid"]  # type: ignore[index]
        log(f"asking the orchestrator (pid {pid}) to stop the job")
        os.kill(pid, signal.SIGTERM)
        if now:
            time.sleep(0.05)
            os.kill(pid, signal.SIGTERM)
        grace = max(view.grace().values(), default=30.0)
        limit = timeout if timeout is not None else grace + 15.0
        if wait_gone([pid], limit):
            log(
                f"the orchestrator did not finish within {limit:g}s; stopping its processes directly"
            )
        else:
            view = JobView.read(path)
            left = view.leftovers()
            if not left:
                log("stopped")
                return 0
    survivors = stop_leftovers(view, 0.0 if now else timeout, log)
    if view.state is not None and not view.orchestrator_alive():
        mark_stopped(view, "srt stop")
    if survivors:
        log("could not stop: " + ", ".join(survivors))
        return 1
    log("nothing of the job is running")
    return 0
