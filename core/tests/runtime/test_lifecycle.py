"""Fault matrix F01-F03, F08, F09, F13, F14: starting, readiness failures, critical exits."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

from srt_services.testing.jobs import Jobs, events_of


def test_F01_critical_exits_before_ready_fails_fast(jobs: Jobs, port: int) -> None:
    run = jobs.run(
        f"""
        schema: 2
        name: f01
        observability:
          metrics: false
        services:
          - name: early
            critical: true
            command: [bash, -c, "for i in $(seq 1 30); do echo line $i; done; exit 3"]
            readiness: {{port: {port}, timeout_seconds: 60, interval_seconds: 2}}
        """
    )
    assert run.code == 1
    assert run.elapsed < 20, "must fail on the exit, not after the 60 s readiness timeout"
    err = run.stderr
    assert "services[early]" in err
    assert "exit code 3" in err
    assert "line 30" in err and "line 11" in err and "line 10\n" not in err  # the last 20 lines
    cause = run.result()["cause"]
    assert (
        cause["kind"] == "exited_before_ready" and cause["code"] == 3 and cause["unit"] == "early"
    )


def test_F02_critical_exit_zero_before_ready_is_a_failure(jobs: Jobs, port: int) -> None:
    run = jobs.run(
        f"""
        schema: 2
        name: f02
        observability:
          metrics: false
        services:
          - name: quits
            critical: true
            command: [bash, -c, "echo bye; exit 0"]
            readiness: {{port: {port}, timeout_seconds: 60}}
        """
    )
    assert run.code == 1
    assert "exited before it was ready (exit code 0" in run.stderr
    assert run.result()["cause"]["code"] == 0


def test_F03_critical_sigkill_after_ready_tears_down_in_tier_order(
    jobs: Jobs, tmp_path, port: int
) -> None:
    order = tmp_path / "order.txt"
    trap = (
        "trap 'echo {name} >> "
        + str(order)
        + "; exit 0' TERM; echo up; while true; do sleep 0.05; done"
    )
    run = jobs.start(
        f"""
        schema: 2
        name: f03
        observability:
          metrics: false
        services:
          - name: infra-svc
            start: infra
            command: [bash, -c, "{trap.format(name="infra")}"]
            readiness: {{log: {{pattern: up}}}}
          - name: early-svc
            start: before_workers
            command: [bash, -c, "{trap.format(name="before_workers")}"]
            readiness: {{log: {{pattern: up}}}}
          - name: late-svc
            command: [bash, -c, "{trap.format(name="after_frontend")}"]
            readiness: {{log: {{pattern: up}}}}
          - name: router
            critical: true
            command: [python3, -m, http.server, "{port}", --bind, "{{node_ip}}"]
            readiness: {{port: {port}}}
        """
    )
    run.wait_event("serving")
    pid = run.state()["instances"]["service_router"]["pid"]
    os.kill(pid, signal.SIGKILL)
    run.wait(30)
    assert run.code == 1
    cause = run.result()["cause"]
    assert cause["kind"] == "critical_service_exit"
    assert cause["unit"] == "router" and cause["signal"] == 9 and cause["node"] == "node0"
    assert order.read_text().split() == ["after_frontend", "before_workers", "infra"]
    tiers = [e["tier"] for e in events_of(run, "stopping_tier")]
    assert tiers == [0, 1, 2]


def test_F08_readiness_timeout_kills_and_reports_last_error(jobs: Jobs, port: int) -> None:
    run = jobs.run(
        f"""
        schema: 2
        name: f08
        observability:
          metrics: false
        services:
          - name: mute
            command: [bash, -c, "sleep 1000 & sleep 1000"]
            readiness: {{port: {port}, timeout_seconds: 1}}
        """
    )
    assert run.code == 1
    assert "was not ready within 1s" in run.stderr
    assert "last probe error: ECONNREFUSED" in run.stderr
    assert run.result()["cause"]["kind"] == "readiness_timeout"
    assert not events_of(run, "restarting")


def test_F09_log_file_never_created(jobs: Jobs, tmp_path) -> None:
    missing = tmp_path / "never" / "there.log"
    run = jobs.run(
        f"""
        schema: 2
        name: f09
        observability:
          metrics: false
        services:
          - name: waits
            command: [sleep, "1000"]
            readiness: {{log: {{pattern: ready, path: "{missing}"}}, timeout_seconds: 1}}
        """
    )
    assert run.code == 1
    assert f"log file {missing} never created" in run.stderr


def test_F09_process_exits_first_fails_immediately(jobs: Jobs, tmp_path) -> None:
    missing = tmp_path / "there.log"
    run = jobs.run(
        f"""
        schema: 2
        name: f09b
        observability:
          metrics: false
        services:
          - name: dies
            command: [bash, -c, "exit 7"]
            readiness: {{log: {{pattern: ready, path: "{missing}"}}, timeout_seconds: 60}}
        """
    )
    assert run.code == 1 and run.elapsed < 20
    assert "exit code 7" in run.stderr


def test_F13_port_held_by_a_stranger_is_named_before_launch(jobs: Jobs, port: int) -> None:
    stranger = socket.socket()
    stranger.bind(("127.0.0.1", port))
    stranger.listen()
    try:
        run = jobs.run(
            f"""
            schema: 2
            name: f13
            observability:
              metrics: false
            services:
              - name: web
                command: [python3, -m, http.server, "{port}", --bind, "{{node_ip}}"]
                readiness: {{port: {port}, timeout_seconds: 30}}
            """
        )
    finally:
        stranger.close()
    assert run.code == 1
    assert f"port {port} on node0 (127.0.0.1) is already in use by pid {os.getpid()}" in run.stderr
    assert not events_of(run, "launched"), "nothing may start when the preflight fails"


def test_F13_F14_probe_never_trusts_a_strangers_listener(jobs: Jobs, port: int) -> None:
    """The stranger binds after the preflight: the tcp probe connects, but to the wrong process."""
    run = jobs.start(
        f"""
        schema: 2
        name: f14
        observability:
          metrics: false
        services:
          - name: slow
            command: [sleep, "1000"]
            readiness: {{port: {port}, timeout_seconds: 2}}
        """
    )
    run.wait_event("launched")
    stranger = socket.socket()
    stranger.bind(("127.0.0.1", port))
    stranger.listen()
    try:
        run.wait(30)
    finally:
        stranger.close()
    assert run.code == 1
    assert "not from a process of this instance" in run.stderr
    assert not events_of(run, "ready")


def test_instances_of_a_service_start_together_and_are_gated_together(jobs: Jobs) -> None:
    run = jobs.run(
        """
        schema: 2
        name: parallel
        observability:
          metrics: false
        services:
          - name: pool
            nodes: 3
            command: [bash, -c, "sleep 0.5; echo up; sleep 1000"]
            readiness: {log: {pattern: up}}
          - name: after
            terminal: true
            command: [bash, -c, "exit 0"]
        """,
        timeout=60,
    )
    assert run.code == 0
    launched = [e["mono"] for e in events_of(run, "launched", unit="pool")]
    assert len(launched) == 3
    assert max(launched) - min(launched) < 0.3, "instances launch in parallel, not one by one"
    ready_at = max(e["mono"] for e in events_of(run, "ready", unit="pool"))
    after = events_of(run, "launched", unit="after")[0]["mono"]
    assert after >= ready_at, "the next service waits for every instance"


def test_terminal_worst_status_counts_signals(jobs: Jobs) -> None:
    run = jobs.run(
        """
        schema: 2
        name: worst
        observability:
          metrics: false
        services:
          - name: ok
            terminal: true
            command: [bash, -c, "exit 0"]
          - name: killed
            terminal: true
            command: [bash, -c, "kill -9 $$"]
        """
    )
    assert run.code == 137
    assert run.result()["cause"]["kind"] == "terminal_exit"


def test_noncritical_exit_is_recorded_and_the_job_goes_on(jobs: Jobs) -> None:
    run = jobs.run(
        """
        schema: 2
        name: goeson
        observability:
          metrics: false
        services:
          - name: flaky
            command: [bash, -c, "sleep 0.2; exit 0"]
          - name: main
            terminal: true
            command: [bash, -c, "sleep 1; exit 0"]
        """
    )
    assert run.code == 0
    assert events_of(run, "exited", unit="flaky", code=0)


def test_benchmark_exit_status_is_the_jobs(jobs: Jobs) -> None:
    run = jobs.run(
        """
        schema: 2
        name: bench
        observability:
          metrics: false
        services:
          - name: side
            command: [sleep, "1000"]
        benchmark:
          type: command
          command: [bash, -c, "exit 5"]
        """
    )
    assert run.code == 5
    assert run.result()["cause"]["kind"] == "benchmark_exit"


def test_status_works_during_and_after_the_job(jobs: Jobs) -> None:
    import json
    import subprocess
    import sys

    run = jobs.start(
        """
        schema: 2
        name: st
        observability:
          metrics: false
        services:
          - name: a
            command: [sleep, "1000"]
        """
    )
    run.wait_event("serving")
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "status", run.job_dir, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["orchestrator_alive"] is True
    row = data["instances"][0]
    assert row["step"] == "service_a" and row["running"] is True
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.code == 143
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "status", run.job_dir, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    data = json.loads(out.stdout)
    assert data["orchestrator_alive"] is False and data["exit_code"] == 143
    assert data["instances"][0]["running"] is False


def test_every_phase_runs_even_without_a_discovery_plane(jobs: Jobs) -> None:
    run = jobs.run(
        """
        schema: 2
        name: phases
        observability:
          metrics: false
        services:
          - name: in-infra
            start: infra
            command: [bash, -c, "echo up; sleep 1000"]
            readiness: {log: {pattern: up}}
          - name: end
            terminal: true
            command: [bash, -c, "exit 0"]
        """
    )
    assert run.code == 0
    assert [e["phase"] for e in events_of(run, "phase_started")] == ["infra", "after_frontend"]


def test_srt_stop_from_another_shell(jobs: Jobs) -> None:
    import subprocess
    import sys

    run = jobs.start(
        """
        schema: 2
        name: stopme
        observability:
          metrics: false
        services:
          - name: a
            command: [sleep, "1000"]
        """
    )
    run.wait_event("serving")
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "srt_services", "stop", run.job_dir], check=True, capture_output=True
    )
    run.wait(30)
    assert run.code == 0, "a serving job ends well when the user stops it"
    assert time.monotonic() - t0 < 20
    result = run.result()
    assert result["status"] == "stopped"
    assert result["cause"]["kind"] == "user_stop"
    assert result["cause"]["message"].startswith("stopped by srt stop from ")


def test_after_starts_a_service_once_what_it_names_is_ready(jobs: Jobs) -> None:
    """`quick` leaves the chain and starts with its phase; `late`, declared before `tail`,
    starts once `tail` is ready; `tail` still waits for `slow`, the service before it."""
    run = jobs.run(
        """
        schema: 2
        name: after
        observability:
          metrics: false
        services:
          - name: slow
            command: [bash, -c, "sleep 1; echo up; exec sleep 1000"]
            readiness: {log: {pattern: up}, interval_seconds: 0.1}
          - name: quick
            command: [sleep, "1000"]
            after: []
          - name: late
            command: [sleep, "1000"]
            after: [tail]
          - name: tail
            command: [bash, -c, "sleep 0.3; echo up; exec sleep 1000"]
            readiness: {log: {pattern: up}, interval_seconds: 0.1}
          - name: end
            terminal: true
            command: [bash, -c, "exit 0"]
        """,
        timeout=60,
    )
    assert run.code == 0

    def at(event: str, unit: str) -> float:
        (found,) = events_of(run, event, unit=unit)
        return float(found["mono"])

    assert at("launched", "quick") < at("ready", "slow"), "after: [] does not wait"
    assert at("launched", "tail") >= at("ready", "slow"), "the chain is kept"
    assert at("launched", "late") >= at("ready", "tail"), "late waits for what it names"
    assert at("launched", "end") >= max(at("ready", "late"), at("ready", "tail"))


def test_after_a_service_that_fails_never_starts_the_waiting_one(jobs: Jobs) -> None:
    run = jobs.run(
        """
        schema: 2
        name: after-fail
        observability:
          metrics: false
        services:
          - name: waiter
            command: [sleep, "1000"]
            after: [store]
          - name: other
            command: [sleep, "1000"]
            after: []
          - name: store
            command: [bash, -c, "sleep 0.3; exit 3"]
            readiness: {log: {pattern: never}}
        """,
        timeout=60,
    )
    assert run.code == 1
    assert run.result()["cause"]["unit"] == "store"
    assert not events_of(run, "launched", unit="waiter")
    assert events_of(run, "launched", unit="other")


def test_srun_settings_the_local_launcher_cannot_apply_are_named_before_the_start(
    jobs: Jobs,
) -> None:
    run = jobs.run(
        """
        schema: 2
        name: srun-only
        observability:
          metrics: false
        services:
          - name: pinned
            terminal: true
            command: [bash, -c, "exit 0"]
            cpu_bind: map_cpu:0
            srun_options: {mpi: pmix}
        """
    )
    assert run.code == 0
    warning = (
        "services[pinned]: the local launcher does not apply cpu_bind, srun_options;"
        " it runs the process without them"
    )
    output = run.stdout + run.stderr
    assert f"warning: {warning}" in output
    assert output.index("warning: ") < output.index("job srun-only started")
    with open(os.path.join(run.job_dir, "plan.json")) as fh:
        assert json.load(fh)["warnings"] == [warning]


def test_F08_H07_readiness_timeout_stops_like_any_stop(jobs: Jobs, port: int, tmp_path) -> None:
    """H07: a readiness timeout stops the instance with SIGTERM, its grace, then SIGKILL,
    so a service that cleans up on SIGTERM gets to."""
    marker = tmp_path / "cleaned"
    run = jobs.run(
        f"""
        schema: 2
        name: h07
        observability:
          metrics: false
        services:
          - name: polite
            command: [bash, -c, "trap 'echo done > {marker}; exit 0' TERM; while true; do sleep 0.05; done"]
            readiness: {{port: {port}, timeout_seconds: 1}}
            stop_grace_seconds: 5
        """
    )
    assert run.code == 1
    assert marker.read_text().strip() == "done", "the service got SIGTERM and cleaned up"
    assert not events_of(run, "escalated", step="service_polite")
    assert run.result()["cause"]["kind"] == "readiness_timeout"


def test_H07_readiness_timeout_escalates_after_the_grace(jobs: Jobs, port: int) -> None:
    """H07: a service that ignores SIGTERM is killed when its grace ends."""
    run = jobs.run(
        f"""
        schema: 2
        name: h07b
        observability:
          metrics: false
        services:
          - name: deaf
            command: [bash, -c, "trap '' TERM; while true; do sleep 0.05; done"]
            readiness: {{port: {port}, timeout_seconds: 1}}
            stop_grace_seconds: 0.5
        """
    )
    assert run.code == 1
    esc = events_of(run, "escalated", step="service_deaf")
    assert esc and "readiness timeout: did not exit 0.5s after SIGTERM" in esc[0]["detail"]
