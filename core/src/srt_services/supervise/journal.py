"""The job files the orchestrator writes while the job runs: ``events.jsonl``,
``state.json``, ``metrics/targets.json`` and, last, ``result.json``.

``state.json`` is what ``srt status``, ``srt stop`` and a later run in the same directory
recover the job from, so it is rewritten after every change, coalesced: a burst of
launches or exits is one write, a little after the burst, and a teardown's signals go out
before the file is rewritten. A write that fails (a full disk, a read-only remount) is
reported once and the job goes on with its state in memory; the final state and the
result may use the space set aside when the job started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from srt_services.jobdir.events import EventLog
from srt_services.jobdir.result import JobResult, benchmark_summary, write_result
from srt_services.jobdir.state import (
    VERSION,
    InstanceState,
    InstanceStatus,
    JobState,
    JobStatus,
    OrchestratorInfo,
    SessionRecord,
    write_state,
)
from srt_services.launch import process
from srt_services.supervise.scrape_targets import ScrapeTargets

if TYPE_CHECKING:
    from srt_services.contracts.launcher import Launcher
    from srt_services.jobdir.layout import JobDir
    from srt_services.supervise.runs import InstanceRun, JobRun, RunOptions

#: How long a change waits for others before ``state.json`` is rewritten.
STATE_FLUSH_DELAY = 0.02


class Journal:
    """Writes the job's record; :meth:`emit` is every collaborator's way to report."""

    def __init__(self, job: JobDir, run: JobRun, launcher: Launcher, options: RunOptions) -> None:
        self.job = job
        self.run = run
        self.launcher = launcher
        self.options = options
        self.started_wall = time.time()
        self.identity = OrchestratorInfo.this_process(self.started_wall)
        self.events: EventLog | None = None
        #: source builds in progress or done, by step (shown beside the instances)
        self.builds: dict[str, InstanceState] = {}
        #: job files that could not be written (file -> why), reported once each
        self.write_errors: dict[str, str] = {}
        #: the final status once the job ended (nothing rewrites the state after that)
        self.final_status: JobStatus | None = None
        self._dirty = False
        #: ``metrics/targets.json``: the metrics endpoints of the instances that run now
        self.scrape_targets = ScrapeTargets(run.plan, job.path, self.guarded)

    def open(self) -> None:
        self.events = EventLog(self.job.events_file, self.options.on_event)
        self.events.on_error = self._events_unwritable
        self.scrape_targets.open()

    def close(self) -> None:
        if self.events is not None:
            self.events.close()

    def emit(self, event: str, /, **fields: Any) -> None:
        if self.events is not None:
            self.events.emit(event, **fields)

    def flush_events(self) -> None:
        """Write the pending events now (what a reader must see before what follows)."""
        if self.events is not None:
            self.events.flush()

    # ------------------------------------------------------------------ state.json

    def mark_dirty(self) -> None:
        if self._dirty:
            return
        self._dirty = True
        asyncio.get_running_loop().call_later(STATE_FLUSH_DELAY, self.flush)

    def flush(self) -> None:
        """Write the state now (milestones are announced after the state file has them)."""
        self._dirty = False
        if self.final_status is not None:
            return  # a timer firing while asyncio.run winds down must not undo the final state
        self.scrape_targets.flush_pending()
        self.write_state("stopping" if self.run.stopping else "running")

    def write_state(self, status: JobStatus) -> None:
        self.guarded("state.json", lambda: write_state(self.job, self.state(status)))

    def state(self, status: JobStatus) -> JobState:
        run = self.run
        state = JobState(
            version=VERSION,
            job_name=run.plan.job_name,
            job_id=run.plan.job_id,
            cookie=self.options.cookie,
            launcher=self.launcher.name,
            status=status,
            phase=run.phase,
            orchestrator=self.identity,
            instances={inst.step: _instance_state(inst) for inst in run.instances},
            cause=run.stop_cause,
            unkillable=run.unkillable,
        )
        state.cgroup = self.launcher.cgroup_path()
        sessions = self.launcher.sessions()
        state.sessions = [SessionRecord(sid, step) for sid, step in sessions.items()]
        if self.builds:
            self._fill_build_pids(sessions)
        state.builds = self.builds
        return state

    # ------------------------------------------------------------------ builds

    def build_event(self, event: str, /, **fields: Any) -> None:
        """A source build's event: reported, and the build shown in the state meanwhile."""
        self.emit(event, **fields)
        unit = fields.get("unit")
        step = fields.get("step") or f"service_{unit}.build"
        if event == "build_started" and unit:
            self.builds[step] = InstanceState(
                unit, fields.get("node", ""), "starting", None, None, None, time.time(),
                None, 1, 0, None, f"logs/{step}.out", None, {"build": True},
            )  # fmt: skip
            self.mark_dirty()
        elif event == "build_done" and unit:
            self.build_ended(step, "exited", 0)

    def builds_ended(self, unit: str, state: InstanceStatus, code: int | None) -> None:
        """Every build of ``unit`` still running (one per node with ``build_scope: node``)."""
        for step, build in self.builds.items():
            if build.unit == unit:
                self.build_ended(step, state, code)

    def build_ended(self, step: str, state: InstanceStatus, code: int | None) -> None:
        build = self.builds.get(step)
        if build is not None and build.state == "starting":
            build.state = state
            build.exit_code = code
            self.mark_dirty()

    def _fill_build_pids(self, sessions: dict[int, str]) -> None:
        """A running build's PID is the newest session the launcher started for its step."""
        for step, build in self.builds.items():
            if build.state != "starting":
                continue
            pids = [pid for pid, s in sessions.items() if s == step]
            if pids and pids[-1] != build.pid:
                build.pid = build.pgid = pids[-1]
                build.start_ticks = process.start_ticks(pids[-1])

    # ------------------------------------------------------------------ the end

    def finish(self, code: int) -> None:
        """The final state and ``result.json``, then the ``job_finished`` event."""
        run = self.run
        self.scrape_targets.close()
        self.final_status = "stopped" if run.by_user else "finished" if code == 0 else "failed"
        self.write_state(self.final_status)
        self._write_result(code)
        cause = run.stop_cause
        self.emit("job_finished", code=code, cause=cause.as_json() if cause is not None else None)

    def _write_result(self, code: int) -> None:
        run = self.run
        result = JobResult(
            job_name=run.plan.job_name,
            job_id=run.plan.job_id,
            exit_code=code,
            status="stopped" if run.by_user else "succeeded" if code == 0 else "failed",
            cause=run.stop_cause,
            started=self.started_wall,
            ended=time.time(),
            unkillable=run.unkillable,
            benchmark=benchmark_summary(self.job),
        )
        self._last_write("result.json", lambda: write_result(self.job, result))
        if "state.json" in self.write_errors and self.final_status is not None:
            final = self.final_status
            self._last_write("state.json", lambda: write_state(self.job, self.state(final)))

    # ------------------------------------------------------------------ write failures

    def guarded(self, what: str, write: Callable[[], None]) -> bool:
        """Write a job file; a failure (ENOSPC, a read-only remount) is reported once and
        the job goes on with its state in memory, rewritten at the next change."""
        try:
            write()
        except OSError as exc:
            if what not in self.write_errors:
                self.write_errors[what] = exc.strerror or str(exc)
                self.emit(
                    "job_dir_error",
                    detail=f"cannot write {what} in {self.job.path}: {exc.strerror};"
                    " the job goes on with its state in memory",
                )
            return False
        if self.write_errors.pop(what, None) is not None:
            self.emit("job_dir_recovered", detail=f"{what} written again")
        return True

    def _events_unwritable(self, exc: OSError) -> None:
        if "events.jsonl" not in self.write_errors:
            self.write_errors["events.jsonl"] = exc.strerror or str(exc)
            self.emit(
                "job_dir_error",
                detail=f"cannot write events.jsonl in {self.job.path}: {exc.strerror};"
                " the job goes on with its state in memory",
            )

    def _last_write(self, what: str, write: Callable[[], None]) -> None:
        """The final state and result: if the disk is full, give back the space set aside
        when the job started, and try again."""
        if self.guarded(what, write):
            return
        if self.options.reserve is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.options.reserve)
            self.guarded(what, write)


def _instance_state(inst: InstanceRun) -> InstanceState:
    p = inst.planned
    h = inst.handle
    if h is not None and h.start_ticks is None and h.returncode is None and h.pid:
        # read once, in the first write after the launch (see ``process.spawn``); an
        # agent's attempt has PID 0 until the agent tells its PID and start time
        h.start_ticks = process.start_ticks(h.pid)
    # Positional, in InstanceState's field order: this runs for every instance on every
    # state write, and a keyword call costs about twice as much.
    return InstanceState(
        p.unit,
        p.node,
        inst.state,
        h.pid or None if h else None,
        h.pgid or None if h else None,
        h.start_ticks if h else None,
        h.started_wall if h else None,
        inst.ready_at,
        inst.attempt,
        inst.restarts,
        inst.exit_code,
        p.log,
        p.readiness.describe if p.readiness else None,
        h.extra if h else {},
        inst.unavailable
        or (h.exit_reason if h is not None and inst.state in ("failed", "exited") else None),
    )
