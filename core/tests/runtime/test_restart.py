"""Fault matrix F04-F07: restarts with backoff, crash loops, backoff reset, stalls (liveness)."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from srt_services.contracts.plan import PlannedRestart
from srt_services.supervise.restart import Action, RestartTracker
from srt_services.testing.jobs import Jobs, events_of, wait_for


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def policy(**kw: float) -> PlannedRestart:
    base = {
        "policy": "on-failure",
        "backoff_initial": 1.0,
        "backoff_max": 8.0,
        "max_failures": 5,
        "window": 600.0,
        "reset_after": 16.0,
        "jitter": 0.25,
    }
    base.update(kw)
    return PlannedRestart(**base)  # type: ignore[arg-type]


def test_F05_delays_double_up_to_max_with_jitter_then_give_up() -> None:
    clock = FakeClock()
    tracker = RestartTracker(policy(max_failures=6), clock, rand=lambda: 1.0)
    delays = []
    for _ in range(5):
        d = tracker.on_exit(1, ran_for=0.1)
        assert d.restart
        delays.append(d.delay)
        clock.now += d.delay
    assert delays == [1.25, 2.5, 5.0, 10.0, 10.0]  # min(initial*2^n, max) * (1 + jitter)
    final = tracker.on_exit(1, ran_for=0.1)
    assert final.action is Action.GIVE_UP and not final.restart
    assert "giving up" in final.reason


def test_F05_jitter_bounds() -> None:
    for r in (0.0, 0.5, 0.999):
        tracker = RestartTracker(policy(), FakeClock(), rand=lambda r=r: r)
        d = tracker.on_exit(1, 0.0)
        assert 1.0 <= d.delay <= 1.25


def test_F05_failures_outside_the_window_are_forgotten() -> None:
    clock = FakeClock()
    tracker = RestartTracker(policy(max_failures=3, window=60.0), clock, rand=lambda: 0.0)
    assert tracker.on_exit(1, 0).restart
    assert tracker.on_exit(1, 0).restart
    clock.now += 61
    assert tracker.on_exit(1, 0).restart, "the first two failures left the window"


def test_F06_stable_run_resets_the_backoff() -> None:
    clock = FakeClock()
    tracker = RestartTracker(policy(), clock, rand=lambda: 0.0)
    assert [tracker.on_exit(1, 0.1).delay for _ in range(3)] == [1.0, 2.0, 4.0]
    assert tracker.on_exit(1, ran_for=16.5).delay == 1.0  # ran longer than reset_after (2 x max)


def test_exit_zero_is_not_a_failure_for_on_failure() -> None:
    tracker = RestartTracker(policy(), FakeClock())
    assert not tracker.on_exit(0, 1.0).restart
    always = RestartTracker(policy(policy="always"), FakeClock(), rand=lambda: 0.0)
    assert always.on_exit(0, 1.0).restart


@given(st.lists(st.tuples(st.integers(0, 255), st.floats(0, 100), st.floats(0, 50)), max_size=40))
def test_restart_tracker_properties(exits: list[tuple[int, float, float]]) -> None:
    """Delays stay within [initial, max*(1+jitter)], and no restart after max_failures in a window."""
    clock = FakeClock()
    p = policy(max_failures=4, window=30.0)
    tracker = RestartTracker(p, clock, rand=lambda: 0.5)
    recent: list[float] = []
    for code, ran_for, gap in exits:
        clock.now += gap
        decision = tracker.on_exit(code, ran_for)
        if code == 0:
            assert not decision.restart
            continue
        recent = [t for t in recent if clock.now - t <= p.window] + [clock.now]
        if len(recent) >= p.max_failures:
            assert not decision.restart
        else:
            assert decision.restart
            assert p.backoff_initial <= decision.delay <= p.backoff_max * (1 + p.jitter)


def test_F04_noncritical_crash_is_restarted_and_others_are_not(jobs: Jobs, tmp_path) -> None:
    starts = tmp_path / "starts"
    run = jobs.start(
        f"""
        schema: 2
        name: f04
        observability:
          metrics: false
        services:
          - name: steady
            command: [bash, -c, "echo up; sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
          - name: flaky
            command: [bash, -c, "echo start >> {starts}; echo up; sleep 0.3; exit 2"]
            readiness: {{log: {{pattern: up}}}}
            restart: {{backoff_initial_seconds: 0.2, backoff_max_seconds: 1, max_failures: 50, jitter: 0}}
        """
    )
    run.wait_event("ready", step="service_steady")
    steady_pid = run.wait_event("launched", step="service_steady")["pid"]
    wait_for(lambda: len(events_of(run, "restarting", step="service_flaky")) >= 2, timeout=20)
    first = events_of(run, "restarting", step="service_flaky")[0]
    assert first["delay"] == pytest.approx(0.2)
    wait_for(lambda: run.state()["instances"]["service_flaky"]["restarts"] >= 2)
    assert len(events_of(run, "launched", step="service_steady")) == 1
    assert run.state()["instances"]["service_steady"]["pid"] == steady_pid
    assert run.proc.poll() is None, "the job keeps running"
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert run.code == 143


def test_F05_crash_loop_stops_after_max_failures(jobs: Jobs, tmp_path) -> None:
    starts = tmp_path / "starts"
    run = jobs.start(
        f"""
        schema: 2
        name: f05
        observability:
          metrics: false
        services:
          - name: hold
            command: [sleep, "1000"]
          - name: loop
            command: [bash, -c, "echo start >> {starts}; exit 1"]
            restart: {{backoff_initial_seconds: 0.05, backoff_max_seconds: 0.2, max_failures: 4, jitter: 0}}
        """
    )
    run.wait_event("unhealthy", step="service_loop", timeout=20)
    time.sleep(1.0)  # nothing may start after the give-up, even later
    assert starts.read_text().count("start") == 4
    assert len(events_of(run, "launched", step="service_loop")) == 4
    assert run.proc.poll() is None
    run.signal(signal.SIGTERM)
    run.wait(30)


def _stall_recipe(port: int, critical: bool) -> str:
    return f"""
        schema: 2
        name: stall
        observability:
          metrics: false
        services:
          - name: hold
            command: [sleep, "1000"]
          - name: web
            critical: {"true" if critical else "false"}
            command: [python3, -m, http.server, "{port}", --bind, "{{node_ip}}"]
            readiness: {{http: {{port: {port}, path: /}}}}
            liveness: {{http: {{port: {port}, path: /}}, period_seconds: 0.3, failure_threshold: 3, attempt_timeout_seconds: 0.3}}
            restart: {{backoff_initial_seconds: 0.1, jitter: 0}}
        """


def test_F07_stall_shorter_than_the_threshold_is_tolerated(jobs: Jobs, port: int) -> None:
    run = jobs.start(_stall_recipe(port, critical=False))
    run.wait_event("serving")
    pid = run.state()["instances"]["service_web"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    run.wait_event("liveness_failed", step="service_web")
    os.kill(pid, signal.SIGCONT)
    time.sleep(1.5)
    assert not events_of(run, "restarting"), "one failure is below the threshold"
    assert run.state()["instances"]["service_web"]["pid"] == pid
    run.signal(signal.SIGTERM)
    run.wait(30)


def test_F07_stall_past_the_threshold_restarts_a_noncritical_service(jobs: Jobs, port: int) -> None:
    run = jobs.start(_stall_recipe(port, critical=False))
    run.wait_event("serving")
    pid = run.state()["instances"]["service_web"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    run.wait_event("restarting", step="service_web", timeout=20)
    assert len(events_of(run, "liveness_failed", step="service_web")) >= 3
    # a liveness failure stops the instance like any stop (H07): SIGTERM with SIGCONT (so a
    # stopped process can act on it), SIGKILL after the grace
    assert events_of(run, "exited", step="service_web", signal=15) or events_of(
        run, "exited", step="service_web", signal=9
    ), "a stopped process is still stopped"
    wait_for(lambda: events_of(run, "ready", step="service_web", attempt=2), timeout=20)
    run.signal(signal.SIGTERM)
    run.wait(30)


def test_F07_stall_of_a_critical_service_tears_the_job_down(jobs: Jobs, port: int) -> None:
    run = jobs.start(
        _stall_recipe(port, critical=True).replace(
            "restart: {backoff_initial_seconds: 0.1, jitter: 0}", ""
        )
    )
    run.wait_event("serving")
    pid = run.state()["instances"]["service_web"]["pid"]
    os.kill(pid, signal.SIGSTOP)
    run.wait(30)
    assert run.code == 1
    cause = run.result()["cause"]
    assert cause["kind"] == "critical_service_exit" and "liveness" in cause["reason"]


def test_a_stopped_process_is_stopped_gracefully_at_teardown(jobs: Jobs) -> None:
    """SIGTERM alone cannot reach a SIGSTOPped process; srt follows it with SIGCONT."""
    run = jobs.start(
        """
        schema: 2
        name: stopped
        observability:
          metrics: false
        services:
          - name: paused
            command: [bash, -c, "trap 'exit 0' TERM; echo up; while true; do sleep 0.05; done"]
            readiness: {log: {pattern: up}}
            stop_grace_seconds: 20
        """
    )
    run.wait_event("serving")
    os.kill(run.state()["instances"]["service_paused"]["pid"], signal.SIGSTOP)
    t0 = time.monotonic()
    run.signal(signal.SIGTERM)
    run.wait(30)
    assert time.monotonic() - t0 < 10, "no need to wait for the 20 s grace"
    assert not events_of(run, "escalated")


def test_F05_H08_backoff_never_overflows() -> None:
    """H08: thousands of restarts (failures spread so the window never fills) keep the
    delay at the maximum; 2**n never overflows, whatever the recipe's numbers."""
    clock = FakeClock()
    tracker = RestartTracker(
        policy(
            max_failures=3, window=1.0, backoff_initial=1e300, backoff_max=1e308, reset_after=1e308
        ),
        clock,
        rand=lambda: 1.0,
    )
    for _ in range(5000):
        d = tracker.on_exit(1, ran_for=0.0)
        assert d.restart
        assert d.delay <= sys.float_info.max
        clock.now += 10.0
    assert tracker.streak <= 64


def test_H08_an_exception_in_the_exit_path_is_never_silent(tmp_path) -> None:
    """H08: an exit callback that raises (the SIGCHLD path) is reported to the watcher's
    owner, and the other children's exits are still delivered."""
    import asyncio
    import subprocess

    from srt_services.launch.children import ChildWatcher

    errors: list[tuple[int, BaseException]] = []
    seen: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        watcher = ChildWatcher(loop, on_error=lambda pid, exc: errors.append((pid, exc)))
        bad = subprocess.Popen(["true"])
        good = subprocess.Popen(["sh", "-c", "sleep 0.1; exit 3"])

        def boom(code: int) -> None:
            raise OverflowError("int too large to convert to float")

        watcher.watch(bad.pid, boom, bad)
        watcher.watch(good.pid, seen.append, good)
        for _ in range(200):
            if seen and errors:
                break
            await asyncio.sleep(0.01)
        watcher.close()

    asyncio.run(main())
    assert seen == [3]
    assert len(errors) == 1 and isinstance(errors[0][1], OverflowError)
