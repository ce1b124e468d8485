"""A job directory as a process other than its orchestrator sees it.

``srt status`` and ``srt stop``, a later ``srt run`` in the same directory, and a
launcher deciding whether a process holding a port is a leftover of a finished job all
start here: read the files once, typed, then ask whether the orchestrator still lives
(PID *and* start time, never the PID alone).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from srt_services import procfs
from srt_services.contracts.plan import Plan
from srt_services.jobdir import lock, reading
from srt_services.jobdir.layout import JobDir, JobDirError
from srt_services.jobdir.result import JobResult, SubmittedJob, read_result, read_submitted
from srt_services.jobdir.state import JobState, read_state


@dataclass(slots=True)
class JobView:
    job: JobDir
    state: JobState | None
    #: ``plan.json``, read by the model that wrote it
    plan: Plan | None
    result: JobResult | None
    submitted: SubmittedJob | None

    @classmethod
    def read(cls, path: str) -> JobView:
        """Read ``path``; :class:`JobDirError` when it is no job directory or a file is bad."""
        job = JobDir(os.path.abspath(path))
        if not os.path.isdir(job.path):
            raise JobDirError(f"{path} is not a directory")
        # The result first: the orchestrator writes its final state before its result, so a
        # result read here guarantees the state read next is the final one. The other order
        # could pair a finished job with an instance still "backoff" from the state before.
        result = read_result(job)
        state = read_state(job)
        plan = reading.read(Plan, job.plan_file, "a valid plan")
        submitted = read_submitted(job)
        if state is None and plan is None and submitted is None:
            raise JobDirError(f"{path} is not an srt job directory (no state.json or plan.json)")
        return cls(job, state, plan, result, submitted)

    @property
    def cookie(self) -> str | None:
        return self.state.cookie if self.state is not None else None

    @property
    def slurm_job_id(self) -> str | None:
        """The Slurm job of a job directory made by ``srt apply`` (``None`` for local jobs)."""
        if self.submitted is not None and self.submitted.launcher == "slurm":
            return self.submitted.job_id
        if self.state is not None and self.state.launcher == "slurm":
            return self.state.job_id
        return None

    @property
    def orchestrator_pid(self) -> int | None:
        return self.state.orchestrator.pid if self.state is not None else None

    def orchestrator_alive(self) -> bool:
        """Whether the process that wrote ``state.json`` still runs the job.

        Here: its PID with its start time. Seen from another host or PID namespace, where
        its PID means nothing: whether it still holds the job directory's lock.
        """
        if self.state is None or self.state.finished:
            return False
        orch = self.state.orchestrator
        if orch.elsewhere() is not None:
            return lock.held(self.job.path) is not None
        return procfs.same_process(orch.pid, orch.start_ticks)

    def not_before_ticks(self) -> int | None:
        """The orchestrator's start: no process of the job started before it."""
        return self.state.orchestrator.start_ticks if self.state is not None else None

    def tiers(self) -> dict[str, int]:
        """step -> shutdown tier, from the plan."""
        if self.plan is None:
            return {}
        return {i.step: u.tier for u in self.plan.units for i in u.instances}

    def grace(self) -> dict[str, float]:
        """step -> seconds between SIGTERM and SIGKILL, from the plan."""
        if self.plan is None:
            return {}
        return {i.step: u.stop_grace for u in self.plan.units for i in u.instances}
