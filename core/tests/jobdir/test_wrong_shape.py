"""Issue 18, item 14: ``state.json`` and ``plan.json`` of the wrong shape (valid JSON, wrong
types, huge integers, missing or extra keys) give ``srt status`` and ``srt stop`` a clear
error or a sane answer, never a traceback, and never make them signal a process whose
identity does not match what the file says.

Fuzzed with hypothesis: a valid file is mutated at random places, and a live decoy process
(a stranger: no cookie, its own session) is written into the PID-like fields. ID
(docs/fault-matrix.md): H18; F23/F24 of the shared matrix are the neighbours.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services import procfs
from srt_services.app.status import status_rows
from srt_services.app.stop import StopRequest, stop_job
from srt_services.errors import SrtError
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.state import encode_state

from .test_job_files import _state

JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
JSON = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def decoy() -> Iterator[tuple[int, int]]:
    """A live stranger: not the job's (no cookie), in a session of its own."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"],
        start_new_session=True,
        env={"PATH": os.environ.get("PATH", "")},
    )
    ticks = procfs.start_ticks(proc.pid)
    assert ticks is not None
    yield proc.pid, ticks
    proc.kill()
    proc.wait()


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        return {**doc, head: _replace(doc[head], rest, value)}
    copy = list(doc)
    copy[head] = _replace(doc[head], rest, value)
    return copy


def _base_state(decoy: tuple[int, int]) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(encode_state(_state()))
    doc["orchestrator"]["host"] = socket.gethostname()  # this machine: stop acts here
    doc["orchestrator"]["start_ticks"] = 1
    doc["sessions"] = [{"sid": decoy[0], "step": "service_etcd"}]
    return doc


def _base_plan() -> dict[str, Any]:
    return {
        "job_name": "demo",
        "units": [{"tier": 0, "stop_grace": 1.0, "instances": [{"step": "service_etcd"}]}],
    }


def _check(job: JobDir, decoy: tuple[int, int]) -> None:
    for call in (
        lambda: status_rows(job.path),
        lambda: stop_job(StopRequest(job.path), log=lambda m: None),
    ):
        message = None
        try:
            call()
        except SrtError as exc:
            message = str(exc)
        assert message is None or message.strip(), "an error says what is wrong"
    assert procfs.same_process(*decoy), "the stranger was signalled"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_H18_a_mutated_state_json(tmp_path: Path, decoy: tuple[int, int], data: Any) -> None:
    job = JobDir(str(tmp_path / f"job{os.urandom(4).hex()}"))
    job.create()
    doc = _base_state(decoy)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        pid_like = path and path[-1] in {"pid", "pgid", "sid"}
        value = data.draw(
            st.one_of(JSON, st.just(decoy[0])) if pid_like else JSON,
        )
        doc = _replace(doc, path, value)
    Path(job.state_file).write_text(json.dumps(doc))
    Path(job.plan_file).write_text(json.dumps(_base_plan()))
    _check(job, decoy)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_H18_a_mutated_plan_json(tmp_path: Path, decoy: tuple[int, int], data: Any) -> None:
    job = JobDir(str(tmp_path / f"job{os.urandom(4).hex()}"))
    job.create()
    doc: Any = _base_plan()
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        doc = _replace(doc, path, data.draw(JSON))
    Path(job.plan_file).write_text(json.dumps(doc))
    Path(job.state_file).write_text(json.dumps(_base_state(decoy)))
    _check(job, decoy)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_H18_a_mutated_result_json_and_events(
    tmp_path: Path, decoy: tuple[int, int], data: Any
) -> None:
    """H18 neighbours: result.json and events.jsonl of the wrong shape."""
    from srt_services.jobdir.events import read_events

    job = JobDir(str(tmp_path / f"job{os.urandom(4).hex()}"))
    job.create()
    result: Any = {
        "job_name": "demo",
        "job_id": "j",
        "exit_code": 0,
        "status": "succeeded",
        "cause": None,
        "started": 1.0,
        "ended": 2.0,
        "unkillable": [],
    }
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(result)))
        result = _replace(result, path, data.draw(JSON))
    Path(job.file("result.json")).write_text(json.dumps(result))
    Path(job.state_file).write_text(json.dumps(_base_state(decoy)))
    lines = data.draw(st.lists(JSON, max_size=4))
    Path(job.events_file).write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert all(isinstance(e, dict) and "event" in e for e in read_events(job.events_file))
    _check(job, decoy)


@pytest.mark.parametrize(
    "field",
    [("instances", "service_etcd", "pid"), ("instances", "service_etcd", "pgid"), ("sessions",)],
)
def test_H18_a_recycled_id_in_the_state_is_never_signalled(
    tmp_path: Path, decoy: tuple[int, int], field: tuple[str, ...]
) -> None:
    """H18: the state names the decoy's PID as an instance, its group, or a session srt
    created, with the start time of the process that had it then; the decoy (the PID's
    new owner) is left alone."""
    job = JobDir(str(tmp_path / "job"))
    job.create()
    doc = json.loads(encode_state(_state()))
    pid, ticks = decoy
    inst = doc["instances"]["service_etcd"]
    inst["start_ticks"] = ticks - 1
    if field == ("sessions",):
        doc["sessions"] = [{"sid": pid, "step": "service_etcd"}]
    else:
        inst[field[-1]] = pid
    doc["orchestrator"]["start_ticks"] = 1  # the job is older than every process
    doc["orchestrator"]["host"] = socket.gethostname()
    Path(job.state_file).write_text(json.dumps(doc))
    said: list[str] = []
    code = stop_job(StopRequest(job.path), log=said.append)
    assert code == 0, said
    assert procfs.same_process(pid, ticks)


def test_H18_another_jobs_cgroup_named_in_the_state_is_not_used(tmp_path: Path) -> None:
    from srt_services.launch.cgroup import JobCgroup

    other = JobCgroup.create("f" * 32)
    if other is None:
        pytest.skip("no writable cgroup v2 here")
    try:
        assert JobCgroup.existing(other.path, "f" * 32) is not None
        assert JobCgroup.existing(other.path, "c0ffee") is None
    finally:
        other.remove()
