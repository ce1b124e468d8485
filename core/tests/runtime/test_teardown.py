"""Fault matrix F15-F20: escaped daemons, TERM-ignoring services, D state, many services,
signals to the orchestrator."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from srt_services.launch import process
from srt_services.testing.fds import open_fds, opened_since
from srt_services.testing.jobs import Jobs, events_of, wait_for
from srt_services.testing.survivors import assert_no_survivors

FREEZER = Path("/sys/fs/cgroup/freezer")


def test_F15_daemonized_grandchildren_are_stopped(jobs: Jobs, tmp_path) -> None:
    pids = tmp_path / "pids"
    run = jobs.start(
        f"""
        schema: 2
        name: f15
        observability:
          metrics: false
        services:
          - name: setsid-daemon
            command: [bash, -c, "setsid bash -c 'echo $$ >> {pids}; exec sleep 1000' & sleep 0.2; exit 0"]
          - name: nohup-daemon
            command: [bash, -c, "nohup sleep 999 >/dev/null 2>&1 & echo $! >> {pids}; exit 0"]
          - name: double-fork
            command: [python3, -c, "import os,time\\nif os.fork(): os._exit(0)\\nos.setsid()\\nif os.fork(): os._exit(0)\\nopen('{pids}','a').write(str(os.getpid())+'\\\\n')\\ntime.sleep(1000)"]
          - name: hold
            command: [sleep, "1000"]
        """
    )
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 3)
    escaped = [int(p) for p in pids.read_text().split()]
    assert all(process.alive(p) for p in escaped)
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.code == 143
    assert not [p for p in escaped if process.alive(p)]


def test_F16_term_ignored_gets_sigkill_after_the_grace(jobs: Jobs) -> None:
    run = jobs.start(
        """
        schema: 2
        name: f16
        observability:
          metrics: false
        services:
          - name: deaf
            command: [bash, -c, "trap '' TERM; echo up; while true; do sleep 0.05; done"]
            readiness: {log: {pattern: up}}
            stop_grace_seconds: 1
        """
    )
    run.wait_event("serving")
    run.signal(signal.SIGTERM)
    run.wait(30)
    stop = events_of(run, "stop_requested")[0]["mono"]
    end = events_of(run, "job_finished")[0]["mono"]
    assert 1.0 <= end - stop < 4.0, "grace plus a small epsilon"
    esc = events_of(run, "escalated", step="service_deaf")
    assert esc and "did not exit 1s after SIGTERM" in esc[0]["detail"]
    assert "service_deaf: did not exit 1s after SIGTERM; sending SIGKILL" in run.stdout


def _freezer_usable() -> bool:
    return os.geteuid() == 0 and FREEZER.is_dir() and os.access(FREEZER, os.W_OK)


@pytest.mark.skipif(
    not _freezer_usable(), reason="needs root and a writable cgroup-v1 freezer (env R)"
)
def test_F17_unkillable_process_is_reported_and_teardown_is_bounded(jobs: Jobs, tmp_path) -> None:
    """A task in a frozen cgroup-v1 freezer is in D state and ignores SIGKILL until thawed:
    the closest thing to an unkillable process a test can make without a kernel module."""
    for stale in FREEZER.glob("srt-test-*"):  # left by a test session that was killed
        if not process.alive(int(stale.name.rsplit("-", 1)[1])):
            (stale / "freezer.state").write_text("THAWED")
            for pid in (stale / "cgroup.procs").read_text().split():
                (FREEZER / "cgroup.procs").write_text(pid)
            stale.rmdir()
    group = FREEZER / f"srt-test-{os.getpid()}"
    group.mkdir()
    try:
        run = jobs.start(
            """
            schema: 2
            name: f17
            observability:
              metrics: false
            services:
              - name: stuck
                command: [sleep, "1000"]
                stop_grace_seconds: 0.5
            """
        )
        run.wait_event("serving")
        pid = run.state()["instances"]["service_stuck"]["pid"]
        (group / "cgroup.procs").write_text(str(pid))
        (group / "freezer.state").write_text("FROZEN")
        wait_for(lambda: process.proc_state(pid) == "D")
        t0 = time.monotonic()
        run.signal(signal.SIGTERM)
        run.wait(40)
        assert time.monotonic() - t0 < 15, "teardown is bounded (grace + kill wait)"
        assert "unkillable (D state" in run.stderr
        assert any("unkillable (D state" in u for u in run.result()["unkillable"])
        assert events_of(run, "unkillable", pid=pid, state="D")
    finally:
        (group / "freezer.state").write_text("THAWED")
        for job in jobs.job_dirs:
            assert_no_survivors(job, wait=5)
        wait_for(lambda: not (group / "cgroup.procs").read_text().strip(), timeout=10)
        group.rmdir()


def test_F18_200_services_no_fd_or_thread_leak(tmp_path) -> None:
    """Run in-process so the orchestrator's own descriptors and threads can be counted."""
    from srt_services.testing import kit

    services = "  - {name: s0, command: [sleep, '1000'], nodes: 4}\n" + "\n".join(
        f"  - {{name: s{i}, command: [sleep, '1000'], placement: {{pool: s0}}}}"
        for i in range(1, 50)
    )
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: f18\nobservability:\n  metrics: false\nservices:\n"
        + services
        + "\n  - {name: end, terminal: true, command: [bash, -c, 'sleep 0.5']}\n"
    )
    plugins = kit.isolated_plugins()
    job_dir = str(tmp_path / "job")
    plan = kit.plan(plugins, recipe, 4, job_dir=job_dir, runs_here=True)
    assert sum(len(u.instances) for u in plan.units) == 201
    fds_before = open_fds()
    threads_before = threading.active_count()
    t0 = time.monotonic()
    code = kit.supervise(plugins, plan, job_dir).code
    assert code == 0
    assert time.monotonic() - t0 < 60
    assert opened_since(fds_before) == []
    assert threading.active_count() == threads_before
    assert_no_survivors(job_dir)


def test_F19_sigterm_during_the_start_phase(jobs: Jobs, port: int) -> None:
    run = jobs.start(
        f"""
        schema: 2
        name: f19
        observability:
          metrics: false
        services:
          - name: first
            start: before_workers
            command: [bash, -c, "echo up; sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
          - name: slow
            command: [sleep, "1000"]
            readiness: {{port: {port}, timeout_seconds: 120}}
        """
    )
    run.wait_event("waiting", step="service_slow")
    t0 = time.monotonic()
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.code == 143
    assert time.monotonic() - t0 < 10, "the readiness wait is abandoned"
    tiers = [e["tier"] for e in events_of(run, "stopping_tier")]
    assert tiers == [0, 1], "the late service stops before the early one"
    assert run.result()["cause"]["kind"] == "signal"


def test_F20_first_sigint_is_graceful(jobs: Jobs, tmp_path) -> None:
    marker = tmp_path / "flushed"
    run = jobs.start(
        f"""
        schema: 2
        name: f20a
        observability:
          metrics: false
        services:
          - name: polite
            command: [bash, -c, "trap 'echo ok > {marker}; exit 0' TERM; echo up; while true; do sleep 0.05; done"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    run.wait_event("serving")
    run.signal(signal.SIGINT)
    run.wait(30)
    assert run.code == 130
    assert marker.read_text().strip() == "ok"
    assert not events_of(run, "escalated")


def test_F20_second_sigint_kills_at_once(jobs: Jobs) -> None:
    run = jobs.start(
        """
        schema: 2
        name: f20b
        observability:
          metrics: false
        services:
          - name: deaf
            command: [bash, -c, "trap '' TERM INT; echo up; while true; do sleep 0.05; done"]
            readiness: {log: {pattern: up}}
            stop_grace_seconds: 60
        """
    )
    run.wait_event("serving")
    run.signal(signal.SIGINT)
    run.wait_event("stopping_tier")
    time.sleep(0.2)
    t0 = time.monotonic()
    run.signal(signal.SIGINT)
    run.wait(30)
    assert time.monotonic() - t0 < 5, "the second Ctrl-C does not wait for the 60 s grace"
    assert run.code == 130
    esc = events_of(run, "escalated", step="service_deaf")
    assert esc and "immediate" in esc[0]["detail"]


def test_orchestrator_sigkilled_then_srt_stop_cleans_up_by_cookie(jobs: Jobs, tmp_path) -> None:
    import subprocess
    import sys

    pids = tmp_path / "pids"
    run = jobs.start(
        f"""
        schema: 2
        name: f21
        observability:
          metrics: false
        services:
          - name: a
            command: [bash, -c, "echo $$ >> {pids}; exec sleep 1000"]
          - name: b
            start: infra
            command: [bash, -c, "setsid bash -c 'echo $$ >> {pids}; exec sleep 1000' & sleep 1000"]
        """
    )
    run.wait_event("serving")
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    os.kill(run.proc.pid, signal.SIGKILL)
    run.wait(10)
    service_pids = [int(p) for p in pids.read_text().split()]
    assert all(process.alive(p) for p in service_pids), "a SIGKILLed orchestrator cleans up nothing"
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "stop", run.job_dir, "--timeout", "5"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert not [p for p in service_pids if process.alive(p)]


def test_rerun_on_a_job_dir_of_a_killed_orchestrator_stops_leftovers_first(
    jobs: Jobs, tmp_path
) -> None:
    pids = tmp_path / "pids"
    text = f"""
        schema: 2
        name: rerun
        observability:
          metrics: false
        services:
          - name: a
            command: [bash, -c, "echo $$ >> {pids}; exec sleep 1000"]
        """

    def written() -> int:
        # "serving" means launched: bash may not have written its PID yet
        return len(pids.read_text().split()) if pids.exists() else 0

    first = jobs.start(text)
    first.wait_event("serving")
    wait_for(lambda: written() == 1)
    os.kill(first.proc.pid, signal.SIGKILL)
    first.wait(10)
    old = int(pids.read_text().split()[0])
    assert process.alive(old)
    second = jobs.start(text, job_dir=first.job_dir)
    second.wait_event("serving")
    assert not process.alive(old), "the leftover of the dead orchestrator was stopped"
    wait_for(lambda: written() >= 2)
    assert written() == 2, "and exactly one new instance started"
    assert len(events_of(second, "launched", step="service_a")) == 1
    second.signal(signal.SIGTERM)
    second.wait(30)


def test_the_job_stops_even_when_its_terminal_is_gone(jobs: Jobs) -> None:
    """A closed terminal (SSH dropped, pipe reader gone) must not make srt deaf to signals:
    reporting fails, acting must not."""
    run = jobs.start(
        """
        schema: 2
        name: deafterm
        observability:
          metrics: false
        services:
          - name: a
            command: [sleep, "1000"]
        """
    )
    run.wait_event("serving")
    assert run.proc.stdout is not None and run.proc.stderr is not None
    run.proc.stdout.close()
    run.proc.stderr.close()
    run.signal(signal.SIGTERM)
    assert run.proc.wait(30) == 143
    assert run.result()["cause"]["kind"] == "signal"
