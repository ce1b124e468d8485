"""The job directory's files: what the orchestrator writes reads back as it was, and a file
of the wrong shape is one clear error naming the file and the field, never a traceback."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services import procfs
from srt_services.app.stop import mark_stopped
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.layout import JobDir, JobDirError, atomic_write
from srt_services.jobdir.reading import JobFileError
from srt_services.jobdir.result import JobResult, read_result, write_result
from srt_services.jobdir.state import (
    InstanceState,
    JobState,
    OrchestratorInfo,
    encode_state,
    read_state,
    write_state,
)
from srt_services.jobdir.view import JobView

STATE_KEYS = [
    "version",
    "job_name",
    "job_id",
    "cookie",
    "launcher",
    "status",
    "phase",
    "orchestrator",
    "instances",
    "cause",
    "unkillable",
]
INSTANCE_KEYS = [
    "unit",
    "node",
    "state",
    "pid",
    "pgid",
    "start_ticks",
    "started",
    "ready_at_mono",
    "attempt",
    "restarts",
    "exit_code",
    "log",
    "readiness",
    "extra",
    "reason",
]


def _state(**changes: Any) -> JobState:
    inst = InstanceState(
        unit="etcd",
        node="node0",
        state="ready",
        pid=4242,
        pgid=4242,
        start_ticks=123456,
        started=1_700_000_000.5,
        ready_at_mono=12.25,
        attempt=1,
        restarts=0,
        exit_code=None,
        log="logs/service_etcd.out",
        readiness="tcp 127.0.0.1:2379",
        extra={"stop_signal": "TERM"},
    )
    base: dict[str, Any] = {
        "version": 1,
        "job_name": "demo",
        "job_id": "job-1",
        "cookie": "c0ffee",
        "launcher": "local",
        "status": "running",
        "phase": "infra",
        "orchestrator": OrchestratorInfo(os.getpid(), 99, "host", 1_700_000_000.0),
        "instances": {"service_etcd": inst},
        "cause": None,
        "unkillable": [],
    }
    base.update(changes)
    return JobState(**base)


@pytest.fixture
def job(tmp_path: Path) -> JobDir:
    j = JobDir(str(tmp_path / "job"))
    j.create()
    return j


def test_state_round_trips_with_the_documented_keys(job: JobDir) -> None:
    cause = StopCause.process_exit(
        StopKind.CRITICAL_SERVICE_EXIT, 137, "it died", unit="etcd", step="s", node="n"
    )
    state = _state(cause=cause, unkillable=["pid 1: still alive (state S)"])
    write_state(job, state)
    assert read_state(job) == state
    raw = json.loads(Path(job.state_file).read_text())
    assert list(raw) == STATE_KEYS
    assert list(raw["instances"]["service_etcd"]) == INSTANCE_KEYS
    assert list(raw["orchestrator"]) == [
        "pid",
        "start_ticks",
        "host",
        "started",
        "pid_ns",
        "boot_id",
    ]


def test_stopped_by_is_written_only_when_set(job: JobDir) -> None:
    write_state(job, _state(status="failed"))
    view = JobView.read(job.path)
    mark_stopped(view, "srt stop")
    raw = json.loads(Path(job.state_file).read_text())
    assert list(raw) == [*STATE_KEYS, "stopped_by"]
    assert raw["status"] == "stopped"
    assert raw["stopped_by"] == "srt stop"
    again = read_state(job)
    assert again is not None
    # a job that says stopped holds no instance in a live state (issue 28: `srt status`
    # showed `ready (orchestrator gone)` under it); everything else is kept as it was
    before = _state().instances
    assert {s: i.state for s, i in before.items()} == {"service_etcd": "ready"}
    assert again.instances == {
        s: dataclasses.replace(i, state="stopped") for s, i in before.items()
    }


def test_cause_on_disk_is_flat_with_only_its_fields() -> None:
    killed = StopCause.process_exit(
        StopKind.CRITICAL_SERVICE_EXIT,
        137,
        "critical services[a] exited",
        unit="a",
        step="service_a",
        node="node0",
        reason="liveness failed 3 times: refused",
    )
    assert killed.as_json() == {
        "kind": "critical_service_exit",
        "unit": "a",
        "step": "service_a",
        "node": "node0",
        "code": 137,
        "signal": 9,
        "reason": "liveness failed 3 times: refused",
        "message": "critical services[a] exited",
    }
    assert list(killed.as_json(with_message=False)) == [
        "kind",
        "unit",
        "step",
        "node",
        "code",
        "signal",
        "reason",
    ]
    # a plain exit code carries no signal; the orchestrator's own signal is named
    assert "signal" not in StopCause.process_exit(StopKind.BENCHMARK_EXIT, 3, "m").as_json()
    received = StopCause(StopKind.SIGNAL, "received SIGTERM", signal="SIGTERM")
    assert received.as_json() == {
        "kind": "signal",
        "signal": "SIGTERM",
        "message": "received SIGTERM",
    }
    busy = StopCause(StopKind.PORT_IN_USE, "m", unit="x", detail=("port 1", "port 2"))
    assert busy.as_json()["detail"] == ["port 1", "port 2"]


def test_result_round_trips(job: JobDir) -> None:
    result = JobResult(
        job_name="demo",
        job_id="job-1",
        exit_code=143,
        status="failed",
        cause=StopCause(StopKind.SIGNAL, "received SIGTERM", signal="SIGTERM"),
        started=1.0,
        ended=2.5,
        unkillable=[],
    )
    write_result(job, result)
    assert read_result(job) == result
    raw = json.loads(Path(job.result_file).read_text())
    assert list(raw) == [
        "job_name",
        "job_id",
        "exit_code",
        "status",
        "cause",
        "started",
        "ended",
        "unkillable",
        "benchmark",
    ]


def test_a_reader_never_pairs_a_result_with_an_earlier_state(
    job: JobDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The orchestrator's last two writes (final state, then result) can land between a
    reader's reads of the two files; whatever the reader gets must be one moment of the job:
    never "succeeded" next to an instance still waiting to restart (seen in ``status --watch``
    on a loaded machine)."""
    import srt_services.jobdir.view as view_module

    waiting = dataclasses.replace(_state().instances["service_etcd"], state="backoff")
    write_state(job, _state(instances={"service_etcd": waiting}))
    final = _state(
        status="finished",
        instances={"service_etcd": dataclasses.replace(waiting, state="stopped")},
    )
    result = JobResult("demo", "job-1", 0, "succeeded", None, 1.0, 2.0, [])

    def finish() -> None:  # the orchestrator's JobLog.finish: state, then result
        write_state(job, final)
        write_result(job, result)

    for module, name in ((view_module, "read_state"), (view_module, "read_result")):
        real = getattr(module, name)
        calls = {"n": 0}

        def landing_after(j: JobDir, real: Any = real, calls: dict[str, int] = calls) -> Any:
            got = real(j)
            calls["n"] += 1
            if calls["n"] == 1:
                finish()  # the writer lands right after the reader's first read
            return got

        with monkeypatch.context() as m:
            m.setattr(module, name, landing_after)
            write_state(job, _state(instances={"service_etcd": waiting}))
            Path(job.result_file).unlink(missing_ok=True)
            view = JobView.read(job.path)
        assert view.state is not None
        if view.result is not None:
            assert view.state.instances["service_etcd"].state == "stopped", name


def test_result_carries_the_benchmark_summary_or_says_why_not(job: JobDir) -> None:
    """``SRT_BENCHMARK_RESULT``'s file, copied into result.json: absent is ``None``; one
    that is not JSON (a benchmark killed mid-write) is named, never a lost result."""
    from srt_services.jobdir.result import benchmark_summary

    assert benchmark_summary(job) is None
    Path(job.file("benchmark.json")).write_text('{"runs": [{"ttft_ms": {"p99": 1.5}}]}')
    assert benchmark_summary(job) == {"runs": [{"ttft_ms": {"p99": 1.5}}]}
    result = JobResult("demo", "job-1", 0, "succeeded", None, 1.0, 2.0, [], benchmark_summary(job))
    write_result(job, result)
    assert json.loads(Path(job.result_file).read_text())["benchmark"]["runs"][0]["ttft_ms"] == {
        "p99": 1.5
    }
    assert read_result(job) == result
    Path(job.file("benchmark.json")).write_text('{"runs": [')
    assert "is not JSON" in benchmark_summary(job)["error"]


def _corrupt(doc: dict[str, Any], path: list[str | int], value: Any) -> bytes:
    target: Any = doc
    for key in path[:-1]:
        target = target[key]
    if value is _DROP:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(doc).encode()  # json, not orjson: it writes integers of any size


_DROP = object()

BAD_STATES = [
    (["instances", "service_etcd", "pid"], "4242", "instances.service_etcd.pid"),
    (["instances", "service_etcd", "pid"], 10**40, "instances.service_etcd.pid"),
    (["instances", "service_etcd", "pid"], -1, "instances.service_etcd.pid"),
    (["orchestrator", "pid"], 2**31, "orchestrator.pid"),
    (["orchestrator", "start_ticks"], 2**70, "orchestrator.start_ticks"),
    (["instances", "service_etcd", "attempt"], -3, "instances.service_etcd.attempt"),
    (["instances", "service_etcd", "state"], "dancing", "instances.service_etcd.state"),
    (["status"], None, "status"),
    (["cookie"], _DROP, "cookie"),
    (["instances"], [], "instances"),
    (["cause"], {"kind": "boredom", "message": "x"}, "cause.kind"),
    (["version"], 2, "version"),
]


@pytest.mark.parametrize(("path", "value", "field"), BAD_STATES)
def test_a_state_of_the_wrong_shape_names_the_field(
    job: JobDir, path: list[str | int], value: Any, field: str
) -> None:
    doc = json.loads(encode_state(_state()))
    Path(job.state_file).write_bytes(_corrupt(doc, path, value))
    with pytest.raises(JobFileError) as err:
        read_state(job)
    message = str(err.value)
    assert message.startswith(f"{job.state_file} is not a valid job state: ")
    assert f"{field}: " in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", "is not valid JSON"),
        (b'{"version": 1,', "is not valid JSON"),
        (b"[1, 2]", "(top level): Input should be an object"),
        (b'{"version": 1, "instances": {}, "started": 1e999}', "is not a valid job state"),
        (b"[" * 100_000 + b"]" * 100_000, "state.json"),
    ],
)
def test_unreadable_states_are_one_error(job: JobDir, data: bytes, expected: str) -> None:
    Path(job.state_file).write_bytes(data)
    with pytest.raises(JobFileError) as err:
        read_state(job)
    assert expected in str(err.value)


def test_non_finite_times_are_refused(job: JobDir) -> None:
    data = encode_state(_state()).replace(b'"started": 1700000000.5', b'"started": Infinity')
    assert b"Infinity" in data
    Path(job.state_file).write_bytes(data)
    with pytest.raises(JobFileError):
        read_state(job)


def test_a_missing_file_is_none_and_an_empty_dir_is_no_job(job: JobDir) -> None:
    assert read_state(job) is None
    assert read_result(job) is None
    with pytest.raises(JobDirError, match="not an srt job directory"):
        JobView.read(job.path)
    with pytest.raises(JobDirError, match="not a directory"):
        JobView.read(job.file("nope"))


def test_the_orchestrator_is_known_by_pid_and_start_time(job: JobDir) -> None:
    me = os.getpid()
    ticks = procfs.start_ticks(me)
    assert ticks is not None
    write_state(
        job, _state(orchestrator=OrchestratorInfo(me, ticks, socket.gethostname(), time.time()))
    )
    assert JobView.read(job.path).orchestrator_alive()
    # same PID, another start time: a reused PID is not the orchestrator
    write_state(
        job, _state(orchestrator=OrchestratorInfo(me, ticks + 1, socket.gethostname(), time.time()))
    )
    assert not JobView.read(job.path).orchestrator_alive()
    # a job that says it is over has no live orchestrator, whatever runs under that PID
    write_state(
        job,
        _state(
            status="finished",
            orchestrator=OrchestratorInfo(me, ticks, socket.gethostname(), time.time()),
        ),
    )
    assert not JobView.read(job.path).orchestrator_alive()


@pytest.mark.parametrize("command", ["status", "stop"])
def test_status_and_stop_on_a_corrupt_state_say_so(
    job: JobDir, command: str, python: str, srt_env: dict[str, str]
) -> None:
    doc = json.loads(encode_state(_state()))
    doc["orchestrator"]["pid"] = 10**30
    Path(job.state_file).write_text(json.dumps(doc))
    out = subprocess.run(
        [python, "-m", "srt_services", command, job.path],
        capture_output=True,
        text=True,
        env=srt_env,
        timeout=60,
        check=False,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert f"{job.state_file} is not a valid job state: orchestrator.pid:" in out.stderr


def test_atomic_write_replaces_a_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """The first write creates the file; later ones replace it, and no temporary file is
    left beside it."""
    target = tmp_path / "state.json"
    atomic_write(str(target), b"first")
    assert target.read_bytes() == b"first"
    for n in range(3):
        atomic_write(str(target), f"next {n}".encode())
    assert target.read_bytes() == b"next 2"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
