"""Issue 31, item 4: ``srt metrics`` when it is ended early, and on databases and queries
that are wrong. Real jobs, a real Prometheus (the job's own, and the temporary one
``srt metrics`` starts on a copy of a finished job's database).

* SIGTERM, SIGHUP or SIGINT while the temporary Prometheus runs (the command is held with
  SIGSTOP so the signal lands there, then continued): that Prometheus is gone, its scratch
  directory (the copy of the database) is gone, the exit status is 128 + the signal and
  stderr says what happened, no traceback. A SIGKILL of the command still ends the
  Prometheus (parent-death signal); only the scratch directory is left then.
* A database with a FIFO, a link, a file where a directory belongs, a damaged write-ahead
  log or block: an error naming the file and what is wrong (or, for what Prometheus
  repairs, a warning saying so), never a traceback.
* PromQL that does not parse or fails when evaluated, on a live job and a finished one:
  an error saying what is wrong with the query.

ID (docs/fault-matrix.md): H34.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from srt_services.testing.jobs import JobRun, Jobs, wait_for

BINARIES = ("prometheus", "prometheus-node-exporter", "prometheus-process-exporter")
pytestmark = [
    pytest.mark.component,
    pytest.mark.skipif(
        any(shutil.which(b) is None for b in BINARIES),
        reason="needs prometheus, prometheus-node-exporter, prometheus-process-exporter (Debian)",
    ),
]


def recipe(ports: dict[str, int], seconds: int) -> str:
    return f"""
        schema: 2
        name: mhostile
        benchmark: {{type: command, command: [bash, -c, "sleep {seconds}"]}}
        services:
          - name: prometheus
            type: prometheus
            options: {{port: {ports["prometheus"]}, scrape_interval_seconds: 1}}
          - name: node-exporter
            type: node-exporter
            placement: {{node: head}}
            options: {{port: {ports["node"]}}}
          - name: process-exporter
            type: process-exporter
            placement: {{node: head}}
            options: {{port: {ports["process"]}}}
        """


@pytest.fixture
def ports(srt_free_port: Callable[[], int]) -> dict[str, int]:
    return {n: srt_free_port() for n in ("prometheus", "node", "process")}


def metrics(
    job_dir: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "srt_services", "metrics", job_dir, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def finished_job(srt_jobs: Jobs, ports: dict[str, int]) -> JobRun:
    run = srt_jobs.run(recipe(ports, 5), timeout=90)
    assert run.code == 0, run.stderr
    assert os.path.isdir(os.path.join(run.job_dir, "metrics", "tsdb"))
    return run


# --------------------------------------------------------------------------- signals


def start_held(job_dir: str, scratch: Path) -> tuple[subprocess.Popen[str], psutil.Process]:
    """``srt metrics`` started, then stopped (SIGSTOP) once its Prometheus runs: (the
    command, that Prometheus)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "metrics", job_dir, "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )

    def prometheus() -> psutil.Process | None:
        for child in psutil.Process(proc.pid).children():
            with_name = child.name()
            if with_name == "prometheus":
                return child
        return None

    prom = wait_for(prometheus, timeout=60, step=0.01)
    os.kill(proc.pid, signal.SIGSTOP)
    return proc, prom


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_H34_every_ending_signal_stops_the_temporary_prometheus_and_removes_the_copy(
    srt_jobs: Jobs, ports: dict[str, int], tmp_path: Path, sig: signal.Signals
) -> None:
    run = finished_job(srt_jobs, ports)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc, prom = start_held(run.job_dir, scratch)
    assert [p.name for p in scratch.iterdir()], "the copy is there while it runs"
    os.kill(proc.pid, sig)
    os.kill(proc.pid, signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert f"{sig.name}: stopped" in err and "Traceback" not in err, err
    assert not prom.is_running() or prom.status() == psutil.STATUS_ZOMBIE
    assert list(scratch.iterdir()) == [], "the copy of the database is removed"


def test_H34_a_killed_command_still_ends_its_prometheus(
    srt_jobs: Jobs, ports: dict[str, int], tmp_path: Path
) -> None:
    run = finished_job(srt_jobs, ports)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    proc, prom = start_held(run.job_dir, scratch)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    assert proc.stderr is not None
    proc.stderr.close()
    # the parent-death signal: SIGTERM, as soon as the command is gone
    prom.wait(30)
    shutil.rmtree(scratch)  # what a SIGKILL cannot clean: the copy


# --------------------------------------------------------------------------- bad input


def damaged_copy(run: JobRun, tmp_path: Path, how: str) -> str:
    """A copy of the finished job's directory, its database damaged ``how``."""
    copy = tmp_path / f"job-{how}"
    shutil.copytree(run.job_dir, copy, symlinks=True)
    tsdb = copy / "metrics" / "tsdb"
    if how == "fifo":
        os.mkfifo(tsdb / "wal" / "00000099")
    elif how == "link":
        (tsdb / "wal" / "00000099").symlink_to("/etc/shadow")
    elif how == "not-a-directory":
        shutil.rmtree(tsdb)
        tsdb.write_text("x\n")
    elif how == "wal-is-a-file":
        shutil.rmtree(tsdb / "wal")
        (tsdb / "wal").write_text("x\n")
    elif how == "wal-garbage":
        (tsdb / "wal" / "00000000").write_bytes(os.urandom(100_000))
    elif how == "unreadable":
        os.chmod(tsdb / "wal", 0o000)
    elif how == "block-meta":
        block = tsdb / "01ABCDEFGHJKMNPQRSTVWXYZ01"
        block.mkdir()
        (block / "meta.json").write_text("{bad\n")
    else:  # pragma: no cover
        raise AssertionError(how)
    return str(copy)


@pytest.mark.timeout(600)
def test_H34_bad_queries_get_errors_saying_what_is_wrong_live_and_after(
    srt_jobs: Jobs, ports: dict[str, int]
) -> None:
    run = srt_jobs.start(recipe(ports, 1000))
    run.wait_event("phase_ready", timeout=60, phase="benchmark")
    wait_for(lambda: metrics(run.job_dir, "--query", "up").returncode == 0, timeout=30, step=0.5)
    bad = {
        "up{": "is not valid PromQL: 1:4: parse error",
        "sum(rate(x[5m]": "is not valid PromQL: 1:15: parse error: unclosed left parenthesis",
        "": "is not valid PromQL: 1:1: parse error: no expression found in input",
        'label_replace(up, "a", "$1", "b", "(")': "failed while Prometheus evaluated it",
    }

    def check_queries(where: str, queries: list[str]) -> None:
        for query in queries:
            said = bad[query]
            out = metrics(run.job_dir, "--query", query)
            assert out.returncode == 1, (where, query, out)
            assert f"--query {query!r} {said}" in out.stderr, (where, out.stderr)
            assert "Traceback" not in out.stderr

    check_queries("live", list(bad))
    run.stop()
    run.wait(60)
    # each query on a finished job starts a Prometheus on a copy: two of them
    check_queries("finished", ["up{", 'label_replace(up, "a", "$1", "b", "(")'])


@pytest.mark.timeout(600)
def test_H34_bad_databases_get_errors_naming_the_file(
    srt_jobs: Jobs, ports: dict[str, int], tmp_path: Path
) -> None:
    run = finished_job(srt_jobs, ports)

    refused = {
        "fifo": "wal/00000099 is a FIFO (named pipe): a Prometheus database holds only",
        "link": "wal/00000099 is a symbolic link: a Prometheus database holds only",
        "not-a-directory": "metrics/tsdb is not a directory",
        "wal-is-a-file": "Prometheus cannot open the job's database",
    }
    for how, said in refused.items():
        copy = damaged_copy(run, tmp_path, how)
        out = metrics(copy, "--query", "up")
        assert out.returncode == 1 and said in out.stderr, (how, out.stderr)
        assert "Traceback" not in out.stderr and "/srt-metrics-" not in out.stderr, out.stderr
        if how == "wal-is-a-file":
            assert f"{copy}/metrics/tsdb/wal: not a directory" in out.stderr, out.stderr
    repaired = {
        "wal-garbage": "is damaged: Encountered WAL read error, attempting repair",
        "block-meta": "is damaged: Failed to read meta.json for a block",
    }
    for how, said in repaired.items():
        copy = damaged_copy(run, tmp_path, how)
        out = metrics(copy, "--json")
        assert out.returncode == 0, (how, out.stderr)
        assert f"srt metrics: warning: the job's database {copy}/metrics/tsdb {said}" in out.stderr
        assert "Traceback" not in out.stderr
    # an unreadable one: a user running srt metrics on a job whose database they may not
    # read (root reads everything: the command is run as nobody then)
    if os.geteuid() == 0:
        base = Path(tempfile.mkdtemp(prefix="srt-h29-"))
        try:
            base.chmod(0o755)
            copy = str(base / "job")
            shutil.copytree(run.job_dir, copy, symlinks=True)
            for top, _dirs, files in os.walk(copy):
                os.chmod(top, 0o755)
                for name in files:
                    os.chmod(os.path.join(top, name), 0o644)
            os.chmod(os.path.join(copy, "metrics", "tsdb", "wal"), 0o700)
            out = subprocess.run(
                ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable,
                 "-m", "srt_services", "metrics", copy, "--query", "up"],
                capture_output=True, text=True, timeout=120, check=False,
                env={**os.environ, "TMPDIR": str(base)},
            )  # fmt: skip
        finally:
            shutil.rmtree(base)
    else:
        copy = damaged_copy(run, tmp_path, "unreadable")
        out = metrics(copy, "--query", "up")
    assert out.returncode == 1, out
    assert "the job's database cannot be read: " in out.stderr, out.stderr
    assert f"{copy}/metrics/tsdb/wal" in out.stderr, out.stderr
    assert "Permission denied" in out.stderr and "Traceback" not in out.stderr, out.stderr
