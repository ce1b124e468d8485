"""Issue 31, item 1: the control socket under hostile and careless clients. Whatever a
client sends (nesting, floods of connections, silence, two requests at once, random bytes
fuzzed with hypothesis) the orchestrator answers or drops that client and goes on: no
exception reaches its loop, its descriptors stay bounded, ``state.json`` keeps being
written, one operation per service runs at a time (the second is refused as busy, and
says what holds it), and every process it starts is one it tracks. A user who may not
act is refused, never shown a traceback.

ID (docs/fault-matrix.md): H24 (requests), H25 (floods), H26 (concurrent operations),
H27 (another user).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.jobdir.control import MAX_REQUEST, Request, short_address
from srt_services.launch.process import pids_with_cookie
from srt_services.supervise.control import MAX_CLIENTS
from srt_services.testing.jobs import JobRun, Jobs, events_of, wait_for
from srt_services.testing.jobs import run_srt as srt

RECIPE = """
schema: 2
observability:
  metrics: false
name: ctl
services:
  - name: web
    command: [bash, -c, "echo up; exec sleep 1000"]
    readiness: {log: {pattern: up}}
  - name: flaky
    command: [bash, -c, "echo flaky; sleep 0.2; exit 3"]
    restart: {backoff_initial_seconds: 0.1, backoff_max_seconds: 0.1, jitter: 0, max_failures: 100000}
"""


def connect(job_dir: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    with short_address(job_dir) as address:
        s.connect(address)
    return s


def exchange(job_dir: str, line: bytes) -> dict[str, Any]:
    """Send one line and read the final answer (the notes before it are skipped)."""
    with connect(job_dir) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(line)
            s.shutdown(socket.SHUT_WR)
        with s.makefile("rb") as reader:
            for raw in reader:
                answer: dict[str, Any] = json.loads(raw)
                if "note" not in answer:
                    return answer
    raise AssertionError(f"no answer to {line[:60]!r}")


def orchestrator(run: JobRun) -> int:
    pid = run.state()["orchestrator"]["pid"]
    assert isinstance(pid, int)
    return pid


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def untracked(run: JobRun) -> list[int]:
    """Processes carrying the job's cookie that no instance's recorded PID (or group)
    accounts for: what the orchestrator started and lost track of."""
    state = run.state()
    groups = {i["pgid"] for i in state["instances"].values() if i["pgid"]}
    out = []
    for pid, _step in pids_with_cookie(state["cookie"]):
        try:
            if os.getpgid(pid) in groups:
                continue
        except ProcessLookupError:
            continue
        out.append(pid)
    return out


def test_H24_nested_oversized_and_odd_requests_are_answered_and_the_job_goes_on(
    jobs: Jobs,
) -> None:
    run = jobs.start(RECIPE)
    run.wait_event("serving")
    deep_op = b'{"op": ' + b"[" * 900 + b"]" * 900 + b', "unit": "web"}\n'
    cases = [
        (b"[" * 100_000 + b"\n", f"the request is longer than {MAX_REQUEST} bytes"),
        (b"[" * 2000 + b"]" * 2000 + b"\n", "the request is not a JSON object"),
        (deep_op, "op must be one of hello, restart, stop, not a list"),
        (b'{"op": "restart", "unit": "' + b"w" * 300 + b'"}\n', "at most 256 characters"),
        (b'{"op": "restart", "unit": "web", "force": "yes"}\n', "must be true or false"),
        (b"\xff\xfe\x00garbage\n", "the request is not a JSON object"),
        (b"", "the request is not a JSON object"),
    ]
    for line, why in cases:
        answer = exchange(run.job_dir, line)
        assert answer["refused"] is True and why in answer["text"], (line[:40], answer)
    assert run.proc.poll() is None
    assert not events_of(run, "control_error")
    assert "Traceback" not in Path(run.job_dir, "events.jsonl").read_text()
    assert srt("restart", run.job_dir, "web").returncode == 0
    run.stop()
    run.wait(30)
    assert "Traceback" not in run.stderr and "Unhandled exception" not in run.stderr


def test_H25_a_flood_of_connections_costs_the_job_nothing(jobs: Jobs) -> None:
    run = jobs.start(RECIPE)
    run.wait_event("serving")
    orch = orchestrator(run)
    before = fds(orch)
    restarts_before = run.state()["instances"]["service_flaky"]["restarts"]
    held: list[socket.socket] = []
    busy = 0
    peak = before
    try:
        for _ in range(600):  # idle connections that never send a request
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # blocking: waits for
            with short_address(run.job_dir) as address:  # room in the listen backlog
                s.connect(address)
            held.append(s)
        time.sleep(0.5)
        peak = fds(orch)
        for s in held:
            s.setblocking(False)
            with contextlib.suppress(BlockingIOError, ConnectionResetError):
                if b'"busy":true' in s.recv(4096):
                    busy += 1
        # meanwhile the flaky service went on being restarted, and state.json written
        wait_for(
            lambda: run.state()["instances"]["service_flaky"]["restarts"] >= restarts_before + 3,
            timeout=20,
        )
    finally:
        for s in held:
            s.close()
    assert peak <= before + MAX_CLIENTS + 2, (before, peak)
    assert busy >= 600 - MAX_CLIENTS - 5, busy
    assert not events_of(run, "launch_failed")
    assert run.proc.poll() is None
    # the idle ones went away, and their slots with them: the socket serves again
    wait_for(lambda: exchange(run.job_dir, b'{"op": "hello"}\n')["ok"], timeout=10)
    assert srt("restart", run.job_dir, "web").returncode == 0
    wait_for(lambda: fds(orch) <= before + 2, timeout=20)
    run.stop()
    run.wait(30)
    assert "Too many open files" not in run.stderr + Path(run.job_dir, "events.jsonl").read_text()


def test_H26_two_restarts_of_one_service_at_once_one_is_refused_as_busy(jobs: Jobs) -> None:
    run = jobs.start(RECIPE)
    run.wait_event("serving")
    old = run.state()["instances"]["service_web"]["pid"]
    first, second = connect(run.job_dir), connect(run.job_dir)
    # both requests are on the wire before either is answered
    first.sendall(b'{"op": "restart", "unit": "web"}\n')
    second.sendall(b'{"op": "restart", "unit": "service_web"}\n')
    answers = []
    for s in (first, second):
        with s, s.makefile("rb") as reader:
            answers.append([json.loads(line) for line in reader][-1])
    accepted = [a for a in answers if a["ok"]]
    refused = [a for a in answers if not a["ok"]]
    assert len(accepted) == 1 and len(refused) == 1, answers
    assert refused[0]["busy"] is True and refused[0]["refused"] is True
    assert "a restart from uid" in refused[0]["text"], refused
    assert "refused, not queued" in refused[0]["text"]
    # (state.json is rewritten a moment after the change)
    state = wait_for(
        lambda: (
            (s := run.state()["instances"]["service_web"])["state"] == "ready"
            and s["pid"] != old
            and s
        )
    )
    assert state["attempt"] == 2
    assert len(events_of(run, "launched", step="service_web")) == 2
    assert untracked(run) == []
    run.stop()
    run.wait(30)


OPS = st.sampled_from(["restart", "stop"])
UNITS = st.sampled_from(["web", "service_web", "flaky", "service_flaky"])


def test_H26_fuzzed_concurrent_operations_leave_nothing_untracked(jobs: Jobs) -> None:
    """Any mix of restarts and stops of one service, by name or step, waiting or not, all
    sent at once: each is answered; afterwards every process of the job is tracked."""
    run = jobs.start(RECIPE)
    run.wait_event("serving")

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(batch=st.lists(st.tuples(OPS, UNITS, st.booleans()), min_size=2, max_size=4))
    def check(batch: list[tuple[str, str, bool]]) -> None:
        socks = [connect(run.job_dir) for _ in batch]
        for s, (op, unit, wait) in zip(socks, batch, strict=True):
            s.sendall(json.dumps(Request(op, unit, False, wait).as_json()).encode() + b"\n")
        for s in socks:
            with s, s.makefile("rb") as reader:
                lines = [json.loads(line) for line in reader]
            assert lines and all("note" in m for m in lines[:-1]), lines
            assert set(lines[-1]) >= {"ok", "text", "refused"}, lines
        # once no operation is in progress (a --no-wait one may still run), nothing of
        # the job is untracked
        wait_for(lambda: _idle(run), timeout=60)
        wait_for(lambda: untracked(run) == [], timeout=10)
        assert run.proc.poll() is None
        assert not events_of(run, "control_error")
        assert srt("restart", run.job_dir, "web").returncode == 0  # back for the next one

    check()
    run.stop()
    run.wait(60)


def _idle(run: JobRun) -> bool:
    """No operation in progress: every ``control_request`` has its outcome event."""
    events = run.events()
    asked = sum(1 for e in events if e["event"] == "control_request")
    done = sum(1 for e in events if e["event"] == "control_done")
    return asked == done


LINES = st.one_of(
    st.binary(max_size=200),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
        max_leaves=20,
    ).map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "op": st.one_of(st.sampled_from(["hello", "restart", "stop", "reboot"]), st.integers()),
            "unit": st.one_of(st.text(max_size=10), st.none(), st.lists(st.integers())),
            "force": st.one_of(st.booleans(), st.text(max_size=3)),
            "wait": st.one_of(st.booleans(), st.none()),
        },
    ).map(lambda d: json.dumps(d).encode()),
)


def test_H24_fuzzed_requests_are_each_answered_once(jobs: Jobs) -> None:
    run = jobs.start(RECIPE)
    run.wait_event("serving")

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(line=LINES)
    def check(line: bytes) -> None:
        if b"restart" in line or b"stop" in line:
            # a valid request for a real unit would act: point it at no unit at all
            line = line.replace(b'"web"', b'"nosuch"').replace(b'"flaky"', b'"nosuch"')
        answer = exchange(run.job_dir, line.replace(b"\n", b" ") + b"\n")
        assert isinstance(answer.get("ok"), bool) and isinstance(answer.get("text"), str)
        if not answer["ok"]:
            assert answer["refused"] is True
        assert run.proc.poll() is None

    check()
    assert not events_of(run, "control_error")
    run.stop()
    run.wait(30)
    assert "Traceback" not in run.stderr


FRAMES = st.lists(
    st.one_of(
        LINES,
        st.integers(1, 20_000).map(lambda n: b"[" * n),  # unclosed, past the size limit too
        st.integers(1, 600).map(lambda n: b'{"op":' * n + b'"hello"' + b"}" * n),
        st.integers(1, 1500).map(lambda n: b"[" * n + b"]" * n),
        st.binary(min_size=1, max_size=600),
    ),
    min_size=1,
    max_size=4,
)


def _harmless(frame: bytes) -> bytes:
    """A valid request for a real unit would act: point it at no unit at all."""
    return frame.replace(b'"web"', b'"nosuch"').replace(b'"flaky"', b'"nosuch"')


def test_H24_fuzzed_frames_never_end_the_job_and_its_state_keeps_being_written(
    jobs: Jobs,
) -> None:
    """Several frames per connection, garbage and nesting between them, sent in random
    pieces, with or without a final newline, the client reading the answers or hanging up
    at once: every connection is answered or closed, the orchestrator lives, records no
    error, and ``state.json`` keeps being written (the flaky service's restarts)."""
    run = jobs.start(RECIPE)
    run.wait_event("serving")
    state = Path(run.job_dir, "state.json")

    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        frames=FRAMES,
        newline=st.booleans(),
        pieces=st.integers(1, 6),
        hang_up=st.booleans(),
    )
    def check(frames: list[bytes], newline: bool, pieces: int, hang_up: bool) -> None:
        data = b"\n".join(_harmless(f).replace(b"\n", b" ") for f in frames)
        data += b"\n" if newline else b""
        step = max(1, len(data) // pieces)
        with connect(run.job_dir) as s:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                for at in range(0, len(data), step):
                    s.sendall(data[at : at + step])
                if hang_up:
                    return
                s.shutdown(socket.SHUT_WR)
            received = b""
            with contextlib.suppress(ConnectionResetError):
                while chunk := s.recv(65536):  # answered, then closed; or closed
                    received += chunk
        for raw in received.splitlines():
            answer = json.loads(raw)
            assert isinstance(answer, dict) and isinstance(answer.get("text", ""), str), answer
            if answer.get("ok") is False:
                assert answer["refused"] is True, answer
        assert run.proc.poll() is None

    check()
    assert run.proc.poll() is None
    written = state.stat().st_mtime_ns
    wait_for(lambda: state.stat().st_mtime_ns != written, timeout=20, step=0.05)
    assert json.loads(state.read_bytes())["status"] == "running"
    assert not events_of(run, "control_error")
    assert exchange(run.job_dir, b'{"op": "hello"}\n')["ok"] is True
    run.stop()
    run.wait(30)
    assert "Traceback" not in run.stderr


# --------------------------------------------------------------------------- other users


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory another user can reach (pytest's own are root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="srt-h27-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_nobody(*args: str) -> subprocess.CompletedProcess[str]:
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run(
        [*nobody, sys.executable, "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "HOME": "/tmp"},
    )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_H27_another_user_is_refused_never_shown_a_traceback(jobs: Jobs, open_dir: Path) -> None:
    run = jobs.start(RECIPE, job_dir=str(open_dir / "job"))
    run.wait_event("serving")
    os.chmod(run.job_dir, 0o755)
    for name in ("state.json", "plan.json", "events.jsonl"):
        os.chmod(os.path.join(run.job_dir, name), 0o644)
    stop = as_nobody("stop", run.job_dir)
    assert stop.returncode == 1, stop
    assert "Traceback" not in stop.stderr
    assert f"refused: {run.job_dir} belongs to uid 0, and you are uid 65534" in stop.stderr
    assert not os.path.exists(os.path.join(run.job_dir, "stop-request.json"))
    for args in (("restart", run.job_dir, "web"), ("stop", run.job_dir, "web")):
        done = as_nobody(*args)
        assert done.returncode == 1, done
        assert "Traceback" not in done.stderr
        assert "refused:" in done.stderr and "serves only the job's user" in done.stderr
    assert run.proc.poll() is None
    assert run.state()["status"] == "running"
    run.stop()
    run.wait(30)
