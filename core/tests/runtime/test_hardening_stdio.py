"""Issue 18, item 11: a closed stdout/stderr, a pipe whose reader went away, a hung-up
terminal (EIO, SIGHUP): the job's exit status and ``result.json`` are those of a run with a
terminal, and nothing prints a traceback.

ID (docs/fault-matrix.md): H15. Each run ends with the no-survivors check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.survivors import assert_no_survivors

RECIPE = textwrap.dedent(
    """
    schema: 2
    observability:
      metrics: false
    name: h15
    services:
      - name: talker
        terminal: true
        command: [bash, -c, 'for i in $(seq 40); do echo "line $i"; sleep 0.05; done; exit 3']
    """
)


def _srt(job: Path, recipe: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "srt_services", "run", str(recipe), "--job-dir", str(job), *extra]


def _outcome(job: Path) -> dict[str, Any]:
    result = json.loads((job / "result.json").read_text())
    cause = result["cause"] or {}
    return {
        "exit_code": result["exit_code"],
        "status": result["status"],
        "cause": {k: v for k, v in cause.items() if k != "message"},
    }


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(RECIPE)
    return path


@pytest.fixture
def reference(tmp_path: Path, recipe: Path) -> tuple[int, dict[str, Any]]:
    """The run with everything in place (stdout and stderr read to the end)."""
    job = tmp_path / "reference"
    out = subprocess.run(
        _srt(job, recipe, "--plain"), capture_output=True, text=True, check=False, timeout=120
    )
    assert "Traceback" not in out.stderr
    assert_no_survivors(str(job))
    return out.returncode, _outcome(job)


def _closed(job: Path, recipe: Path) -> tuple[int, str]:
    err = job.parent / f"{job.name}.err"
    with err.open("w") as fh:
        # stdout closed in the child, as `srt run ... >&-` does
        code = subprocess.run(
            _srt(job, recipe, "--plain"),
            stdout=fh,
            stderr=fh,
            stdin=subprocess.DEVNULL,
            preexec_fn=lambda: os.close(1),
            check=False,
            timeout=120,
        ).returncode
    return code, err.read_text()


def _all_closed(job: Path, recipe: Path) -> tuple[int, str]:
    def close_all() -> None:
        for fd in (0, 1, 2):
            os.close(fd)

    code = subprocess.run(
        _srt(job, recipe), preexec_fn=close_all, check=False, timeout=120
    ).returncode
    return code, ""


def _pipe_reader_gone(job: Path, recipe: Path) -> tuple[int, str]:
    read, write = os.pipe()
    err = job.parent / f"{job.name}.err"
    with err.open("w") as fh:
        proc = subprocess.Popen(_srt(job, recipe, "--plain"), stdout=write, stderr=fh)
        os.close(write)
        os.read(read, 10)  # the first line, then the reader goes away
        os.close(read)
        code = proc.wait(120)
    return code, err.read_text()


def _pty_hung_up(ctty: bool, plain: bool) -> Callable[[Path, Path], tuple[int, str]]:
    def run(job: Path, recipe: Path) -> tuple[int, str]:
        master, slave = os.openpty()

        def setup() -> None:
            os.setsid()
            if ctty:  # the terminal controls the session: closing it sends SIGHUP
                import fcntl
                import termios

                fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        proc = subprocess.Popen(
            _srt(job, recipe, *(["--plain"] if plain else [])),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            preexec_fn=setup,  # noqa: PLW1509
            close_fds=True,
        )
        os.close(slave)
        seen = b""
        deadline = time.monotonic() + 60
        while b"service_talker" not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(master, 4096)
            except OSError:
                break
        os.close(master)  # hang up: reads and writes on the slave now fail with EIO
        return proc.wait(120), seen.decode(errors="replace")

    return run


CASES: dict[str, Callable[[Path, Path], tuple[int, str]]] = {
    "stdout-closed": _closed,
    "stdin-stdout-stderr-closed": _all_closed,
    "pipe-reader-gone": _pipe_reader_gone,
    "pty-hung-up-eio": _pty_hung_up(ctty=False, plain=False),
    "pty-hung-up-sighup-live": _pty_hung_up(ctty=True, plain=False),
    "pty-hung-up-sighup-plain": _pty_hung_up(ctty=True, plain=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_H15_the_outcome_does_not_depend_on_who_reads(
    tmp_path: Path, recipe: Path, reference: tuple[int, dict[str, Any]], case: str
) -> None:
    """H15: exit status 3 (the terminal service's) and the same result.json, no traceback."""
    code, err = CASES[case](tmp_path / case, recipe)
    assert "Traceback" not in err
    assert (code, _outcome(tmp_path / case)) == reference
    assert reference[0] == 3
    assert_no_survivors(str(tmp_path / case))


def test_H15_a_hang_up_is_noted_and_the_job_goes_on(tmp_path: Path) -> None:
    # the talker runs 10 s here, not 2: the hang-up must reach the job while it runs even
    # when a loaded machine shows the first line late (a SIGHUP after the job's end is,
    # rightly, not acted on)
    recipe = tmp_path / "long.yaml"
    recipe.write_text(RECIPE.replace("$(seq 40)", "$(seq 200)"))
    job = tmp_path / "noted"
    code, _ = _pty_hung_up(ctty=True, plain=True)(job, recipe)
    assert code == 3
    events = [json.loads(line) for line in (job / "events.jsonl").read_text().splitlines()]
    hangups = [e for e in events if e["event"] == "signal" and e.get("signal") == "SIGHUP"]
    assert hangups and "goes on" in hangups[0]["detail"]
    assert not [e for e in events if e["event"] == "stop_requested" and "SIGHUP" in str(e)]
    assert signal.SIGHUP  # the kernel sent it: the pty was the session's terminal
    assert_no_survivors(str(job))
