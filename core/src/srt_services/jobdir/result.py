"""``result.json`` (how the job ended, written last) and ``job.json`` (what ``srt apply``
submitted to Slurm)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import orjson
from pydantic import FiniteFloat

from srt_services.contracts.benchmark import RESULT_FILE
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
    #: the benchmark's summary (``SRT_BENCHMARK_RESULT``), when it left one
    benchmark: Any = None


#: A summary larger than this is not copied (result.json stays small enough to read whole).
MAX_BENCHMARK_SUMMARY = 4 * 1024 * 1024


def benchmark_summary(job: JobDir) -> Any:
    """What the benchmark wrote to its result file: the JSON value, ``None`` when it wrote
    nothing, or ``{"error": ...}`` when the file is not what the contract asks for (the job
    result must still be written: a broken summary never costs the job its result)."""
    path = job.file(RESULT_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BENCHMARK_SUMMARY + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return {"error": f"cannot read {RESULT_FILE}: {exc.strerror}"}
    if len(data) > MAX_BENCHMARK_SUMMARY:
        return {"error": f"{RESULT_FILE} is larger than {MAX_BENCHMARK_SUMMARY} bytes"}
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        return {"error": f"{RESULT_FILE} is not JSON: {exc}"}


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
        "benchmark": result.benchmark,
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
