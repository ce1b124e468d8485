"""``result.json`` (how the job ended, written last) and ``job.json`` (what ``srt apply``
submitted to Slurm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import orjson
from pydantic import FiniteFloat

from srt_services.jobdir import reading
from srt_services.jobdir.cause import StopCause
from srt_services.jobdir.layout import JobDir, atomic_write
from srt_services.jobdir.state import Count, ExitCode


@dataclass(slots=True)
class JobResult:
    job_name: str
    job_id: str
    exit_code: ExitCode
    #: ``stopped``: ended by ``srt stop`` (see the user guide for its exit code)
    status: Literal["succeeded", "failed", "stopped"]
    cause: StopCause | None
    started: FiniteFloat
    ended: FiniteFloat
    #: processes that survived SIGKILL (uninterruptible sleep), one sentence each
    unkillable: list[str]


def write_result(job: JobDir, result: JobResult) -> None:
    doc = {
        "job_name": result.job_name,
        "job_id": result.job_id,
        "exit_code": result.exit_code,
        "status": result.status,
        "cause": result.cause.as_json() if result.cause is not None else None,
        "started": result.started,
        "ended": result.ended,
        "unkillable": result.unkillable,
    }
    atomic_write(job.result_file, orjson.dumps(doc, option=orjson.OPT_INDENT_2))


def read_result(job: JobDir) -> JobResult | None:
    return reading.read(JobResult, job.result_file, "a valid job result")


@dataclass(slots=True)
class SubmittedJob:
    """A batch job ``srt apply`` submitted; its orchestrator runs inside the allocation."""

    job_id: str
    #: wall time of the submission
    submitted: FiniteFloat
    script: str
    launcher: str = "slurm"
    #: nodes asked for (absent in records of older versions)
    nodes: Count | None = None


def write_submitted(job: JobDir, submitted: SubmittedJob) -> None:
    atomic_write(job.submission_file, orjson.dumps(submitted, option=orjson.OPT_INDENT_2))


def read_submitted(job: JobDir) -> SubmittedJob | None:
    return reading.read(SubmittedJob, job.submission_file, "a valid Slurm submission record")
