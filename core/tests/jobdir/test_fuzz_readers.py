"""Issue 31, item 7: every command that reads a job directory, run for real (a process per
command, each with its own timeout), on job files of random content: arbitrary bytes,
JSON of any shape, nesting thousands deep, valid files cut short, events mixed with
garbage, and FIFOs and links out in place of any of them. Each command prints its normal
output or a clear error (exit 1 or 2 with a message), never a traceback, never a bare
exit status, never hangs; no secret is printed.

A valid ``state.json`` names an orchestrator whose PID does not exist, so ``srt stop`` has
nobody to signal. ID (docs/fault-matrix.md): H21 (job files), H35 (every reader command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.state import OrchestratorInfo, encode_state

from .test_hostile_files import plant
from .test_job_files import _state

#: Generous: a command that waited on a FIFO or looped would never end at all.
TIMEOUT = 60.0
JOB_FILES = ["state.json", "plan.json", "result.json", "events.jsonl"]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
).map(lambda v: json.dumps(v).encode())


def _dead_pid() -> int:
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def _valid(name: str) -> bytes:
    """The file as srt writes it (the orchestrator dead: nothing to signal)."""
    if name == "state.json":
        orch = OrchestratorInfo.this_process(1_700_000_000.0)
        orch.pid = _dead_pid()
        return encode_state(_state(orchestrator=orch))
    if name == "result.json":
        return b'{"version": 1, "status": "succeeded", "exit_code": 0, "reason": "done"}'
    if name == "events.jsonl":
        return (
            b'{"event": "job_started", "t": 1.0}\n{"event": "launched", "step": "service_etcd"}\n'
        )
    return b"{}"


def content(name: str) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(max_size=200),
        JSON,
        st.integers(1, 50_000).map(lambda n: b"[" * n + b"]" * n),
        st.integers(1, 5_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
        st.integers(0, 400).map(lambda n: _valid(name)[:n]),
        st.just(_valid(name)),
        st.lists(st.one_of(JSON, st.binary(max_size=40)), max_size=6).map(b"\n".join),
    )


@pytest.mark.timeout(900)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_H35_every_reader_command_on_fuzzed_job_files(tmp_path: Path, data: Any) -> None:
    root = tmp_path / f"root{os.urandom(4).hex()}"
    root.mkdir()
    secret = tmp_path / "secret"
    secret.write_text("root's secret\n")
    secret.chmod(0o600)
    job = JobDir(str(root / "job"))
    job.create()
    for name in JOB_FILES:
        choice = data.draw(st.sampled_from(["missing", "bytes", "bytes", "fifo", "link-out"]))
        if choice == "bytes":
            Path(job.file(name)).write_bytes(data.draw(content(name)))
        elif choice != "missing":
            plant(Path(job.file(name)), choice, secret)
    log = data.draw(st.sampled_from(["missing", "bytes", "fifo", "link-out"]))
    if log == "bytes":
        Path(job.logs, "service_etcd.out").write_bytes(data.draw(st.binary(max_size=300)))
    elif log != "missing":
        plant(Path(job.logs, "service_etcd.out"), log, secret)
    commands = [
        ["status", job.path],
        ["status", job.path, "--json"],
        ["logs", job.path],
        ["stop", job.path],
        ["ps", "--root", str(root)],
        ["jobs", "--root", str(root)],
    ]
    procs = [
        (
            cmd,
            subprocess.Popen(
                [sys.executable, "-m", "srt_services", *cmd],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                errors="replace",
            ),
        )
        for cmd in commands
    ]
    for cmd, proc in procs:
        try:
            out, err = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            for _, other in procs:
                other.kill()
                other.communicate()
            raise AssertionError(f"srt {' '.join(cmd)} did not end in {TIMEOUT:g}s") from None
        said = out + err
        assert "Traceback" not in said, (cmd, said)
        assert proc.returncode in (0, 1, 2), (cmd, proc.returncode, said)
        if proc.returncode != 0:
            assert err.strip(), f"srt {' '.join(cmd)}: exit {proc.returncode} and nothing said"
        assert "root's secret" not in said, (cmd, said)
