"""Issue 18, item 12: a job directory that cannot be written, or that fills up mid-job.

The filesystems are real: a small tmpfs this test mounts (as root) under its own temporary
directory, read-only or of a few hundred KB, unmounted at the end. IDs (docs/fault-matrix.md):
H16. Every job ends with the no-survivors check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from srt_services.testing.jobs import Jobs, start_srt
from srt_services.testing.jobs import run_srt as srt
from srt_services.testing.survivors import assert_no_survivors


def _mount(where: Path, options: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "srt-test", str(where)],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[list[Path]]:
    made: list[Path] = []
    if os.geteuid() != 0:
        pytest.skip("mounting a test filesystem needs root (CI runs as root)")
    probe = tmp_path / "can-mount"
    try:
        _mount(probe, "size=64k")
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    made.append(probe)
    yield made
    for path in reversed(made):
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


RECIPE = """
schema: 2
observability:
  metrics: false
name: h16
services:
  - name: a
    command: [sleep, "1000"]
"""


@pytest.mark.parametrize("existing", [False, True])
def test_H16_a_read_only_job_directory_is_refused_before_anything_starts(
    tmp_path: Path, mounts: list[Path], existing: bool
) -> None:
    ro = tmp_path / "ro"
    _mount(ro, "size=1m")
    mounts.append(ro)
    if existing:
        (ro / "job").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(ro)], check=True)
    recipe = tmp_path / "r.yaml"
    marker = tmp_path / "started"
    recipe.write_text(RECIPE.replace('[sleep, "1000"]', f'[touch, "{marker}"]'))
    out = srt("run", str(recipe), "--job-dir", str(ro / "job"), "--plain")
    assert out.returncode == 1
    assert "Read-only file system" in out.stderr
    assert str(ro / "job") in out.stderr
    assert "Traceback" not in out.stderr
    assert not marker.exists(), "nothing was started"


def test_H16_a_full_job_directory_is_refused_before_anything_starts(
    tmp_path: Path, mounts: list[Path]
) -> None:
    full = tmp_path / "full"
    _mount(full, "size=64k")
    mounts.append(full)
    _fill(full / "filler")
    recipe = tmp_path / "r.yaml"
    marker = tmp_path / "started"
    recipe.write_text(RECIPE.replace('[sleep, "1000"]', f'[touch, "{marker}"]'))
    out = srt("run", str(recipe), "--job-dir", str(full / "job"), "--plain")
    assert out.returncode == 1
    assert "No space left on device" in out.stderr
    assert "Traceback" not in out.stderr
    assert not marker.exists()


def _fill(path: Path) -> None:
    """Fill the filesystem of ``path`` (a file of its own, removed by the caller)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (65536, 512, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_H16_a_disk_that_fills_up_during_the_job(
    jobs: Jobs, tmp_path: Path, mounts: list[Path]
) -> None:
    """H16: the job directory fills up while the job runs. The job goes on with its state
    in memory and says so once per file; the state it could not write is written once
    there is room again (the space set aside at the start is given back for the last
    writes), result.json is written, and the job stops cleanly."""
    small = tmp_path / "small"
    _mount(small, "size=2m")
    mounts.append(small)
    job = small / "job"
    filler = small / "filler"
    run = jobs.start(
        """
        schema: 2
        observability:
          metrics: false
        name: h16full
        services:
          - name: steady
            command: [sleep, "1000"]
          - name: flaky
            critical: false
            command: [bash, -c, "sleep 0.2; exit 1"]
            restart: {backoff_initial_seconds: 0.3, backoff_max_seconds: 0.3, max_failures: 100, jitter: 0}
        """,
        job_dir=str(job),
    )
    run.wait_event("serving")
    _fill(filler)
    # the flaky service keeps changing the state: every rewrite of state.json now fails
    # (about four restarts in this while; the disk is full, so the events that say so
    # cannot be watched for in the job directory)
    time.sleep(2.0)
    run.signal(signal.SIGTERM)
    run.wait(60)
    assert run.code == 143
    assert "Traceback" not in run.stderr
    said = run.stdout.count("cannot write state.json")
    assert said == 1, f"reported {said} times:\n{run.stdout}"
    assert "the job goes on with its state in memory" in run.stdout
    result = json.loads((job / "result.json").read_text())
    assert result["exit_code"] == 143 and result["cause"]["kind"] == "signal"
    state = json.loads((job / "state.json").read_text())
    assert state["status"] == "failed", "the final state was written too"
    status = srt("status", str(job), "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] != "running"
    filler.unlink()


def test_H16_status_never_says_running_once_the_orchestrator_is_gone(
    tmp_path: Path, mounts: list[Path]
) -> None:
    """H16: the disk filled up (state.json stuck at "running"), then the orchestrator was
    SIGKILLed: ``srt status`` says the job is lost, and ``srt stop`` cleans up."""
    small = tmp_path / "small2"
    _mount(small, "size=2m")
    mounts.append(small)
    job = small / "job"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    run = start_srt(["run", str(recipe)], str(job))
    run.wait_event("serving")
    _fill(small / "filler")
    os.kill(run.proc.pid, signal.SIGKILL)
    run.wait(30)
    assert json.loads((job / "state.json").read_text())["status"] == "running"
    status = srt("status", str(job), "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["status"] != "running"
    assert all(i.get("state") != "running" for i in data.get("instances", []))
    text = srt("status", str(job))
    assert text.stdout.startswith("job h16: lost"), text.stdout
    (small / "filler").unlink()
    stop = srt("stop", str(job))
    assert stop.returncode == 0, stop.stderr
    assert_no_survivors(str(job))
