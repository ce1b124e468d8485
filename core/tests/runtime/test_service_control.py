"""``srt restart JOBDIR SERVICE`` and ``srt stop JOBDIR SERVICE`` against running jobs: the
orchestrator, asked through the control socket, stops and starts one service with the
job's own stop and readiness paths, refuses what would end the job, and serves only the
job's user."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import socket
import stat
import time
from pathlib import Path

import pytest
from srt_services.jobdir.control import ControlError, Request, ask, short_address
from srt_services.testing.jobs import JobRun, Jobs, events_of
from srt_services.testing.jobs import run_srt as srt


def recipe(port: int, extra: str = "") -> str:
    return f"""
        schema: 2
        observability:
          metrics: false
        name: ctl
        services:
          - name: web
            command: [python3, -m, http.server, "{port}", --bind, "{{node_ip}}"]
            readiness: {{http: {{port: {port}, path: /}}}}
            restart: {{backoff_initial_seconds: 0.2, jitter: 0}}
          - name: core
            critical: true
            command: [bash, -c, "echo up; exec sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
        {extra}
        """


def pid_of(run: JobRun, step: str) -> int:
    pid = run.state()["instances"][step]["pid"]
    assert isinstance(pid, int)
    return pid


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_restart_stops_and_starts_one_service_through_its_readiness(jobs: Jobs, port: int) -> None:
    run = jobs.start(recipe(port))
    run.wait_event("serving")
    old, core = pid_of(run, "service_web"), pid_of(run, "service_core")

    done = srt("restart", run.job_dir, "web")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("restarted in ")
    assert "stopping service_web (pid" in done.stderr
    assert "waiting until ready: service_web" in done.stderr

    new = pid_of(run, "service_web")
    assert new != old and not alive(old) and alive(new)
    assert pid_of(run, "service_core") == core, "nothing else was touched"
    web = run.state()["instances"]["service_web"]
    assert (web["state"], web["attempt"], web["restarts"]) == ("ready", 2, 1)
    shown = json.loads(srt("status", run.job_dir, "--json").stdout)["instances"]
    assert {r["step"]: r["ports"] for r in shown} == {"service_web": [port], "service_core": []}
    table = srt("status", run.job_dir).stdout.splitlines()
    assert table[1].split()[4] == "PORTS" and table[2].split()[4] == str(port), table
    (request,) = events_of(run, "control_request")
    assert request["op"] == "restart" and request["steps"] == ["service_web"]
    assert re.fullmatch(rf"uid {os.geteuid()} \(pid \d+\)", request["by"]), request
    assert events_of(run, "exited", step="service_web", attempt=1, signal=15)
    ready = events_of(run, "ready", step="service_web", attempt=2)
    assert ready and ready[0]["mono"] > request["mono"]
    (restarted,) = events_of(run, "restarted")
    assert restarted["ok"] is True and restarted["unit"] == "web"
    assert not events_of(run, "restarting"), "the restart policy did not fire as well"
    assert run.proc.poll() is None, "the job keeps running"
    run.stop()
    run.wait(30)


def test_a_critical_service_needs_force_and_then_the_job_survives_it(jobs: Jobs, port: int) -> None:
    run = jobs.start(recipe(port))
    run.wait_event("serving")
    core = pid_of(run, "service_core")

    refused = srt("restart", run.job_dir, "core")
    assert refused.returncode == 1
    assert "refused: services[core] is critical" in refused.stderr
    assert "--force" in refused.stderr
    assert pid_of(run, "service_core") == core and alive(core)
    assert events_of(run, "control_refused", unit="core")

    forced = srt("restart", run.job_dir, "core", "--force")
    assert forced.returncode == 0, forced.stderr
    assert pid_of(run, "service_core") != core and not alive(core)
    time.sleep(0.3)
    assert run.proc.poll() is None, "a forced restart of a critical service is not its exit"
    assert run.state()["status"] == "running"
    run.stop()
    run.wait(30)


def test_stop_one_service_keeps_it_down_until_restart(jobs: Jobs, port: int) -> None:
    run = jobs.start(recipe(port))
    run.wait_event("serving")
    old = pid_of(run, "service_web")

    stopped = srt("stop", run.job_dir, "web")
    assert stopped.returncode == 0, stopped.stderr
    assert "stays down" in stopped.stdout
    assert not alive(old)
    time.sleep(1.0)  # five times the backoff: the restart policy must not bring it back
    assert run.state()["instances"]["service_web"]["state"] == "stopped"
    assert len(events_of(run, "launched", step="service_web")) == 1
    again = srt("stop", run.job_dir, "web")
    assert again.returncode == 0 and "already stopped" in again.stdout

    refused = srt("stop", run.job_dir, "core")
    assert refused.returncode == 1 and "critical" in refused.stderr

    back = srt("restart", run.job_dir, "web")
    assert back.returncode == 0, back.stderr
    assert run.state()["instances"]["service_web"]["state"] == "ready"
    assert run.proc.poll() is None
    run.stop()
    run.wait(30)
    assert run.state()["instances"]["service_web"]["state"] == "stopped"


def test_what_cannot_be_restarted_is_refused_with_the_reason(jobs: Jobs, port: int) -> None:
    run = jobs.start(
        recipe(
            port,
            """
        benchmark:
          type: command
          command: [bash, -c, "sleep 1000"]
        """,
        )
    )
    run.wait_event("launched", unit="benchmark")
    bench = srt("restart", run.job_dir, "benchmark", "--force")
    assert bench.returncode == 1
    assert "the benchmark's exit ends the job" in bench.stderr
    unknown = srt("restart", run.job_dir, "nope")
    assert unknown.returncode == 1
    assert "no service, role or step named 'nope' (units: benchmark, core, web)" in unknown.stderr
    one = srt("restart", run.job_dir, "service_web")
    assert one.returncode == 0, one.stderr
    usage = srt("stop", run.job_dir, "web", "--now")
    assert usage.returncode == 2
    run.stop()
    run.wait(30)
    ended = srt("restart", run.job_dir, "web")
    assert ended.returncode == 1
    assert "the job has ended (failed); nothing runs" in ended.stderr


def test_a_restart_that_does_not_come_back_ready_says_so_and_the_job_goes_on(
    jobs: Jobs, tmp_path: Path
) -> None:
    """The second attempt never prints its ready line: not ready, then the restart policy."""
    flag = tmp_path / "once"
    run = jobs.start(
        f"""
        schema: 2
        observability:
          metrics: false
        name: noready
        services:
          - name: svc
            command: [bash, -c, "if [ -e {flag} ]; then exit 4; fi; touch {flag}; echo up; exec sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
            restart: {{backoff_initial_seconds: 30, jitter: 0}}
          - name: hold
            command: [sleep, "1000"]
        """
    )
    run.wait_event("serving")
    done = srt("restart", run.job_dir, "svc")
    assert done.returncode == 1
    assert "restarted but not ready: service_svc backoff" in done.stderr
    assert events_of(run, "restart_failed", step="service_svc")
    assert events_of(run, "restarting", step="service_svc")
    assert run.proc.poll() is None
    run.stop()
    run.wait(30)


def test_a_forced_critical_restart_that_does_not_come_back_ends_the_job(
    jobs: Jobs, tmp_path: Path
) -> None:
    flag = tmp_path / "once"
    run = jobs.start(
        f"""
        schema: 2
        observability:
          metrics: false
        name: critical-noready
        services:
          - name: svc
            critical: true
            command: [bash, -c, "if [ -e {flag} ]; then exit 4; fi; touch {flag}; echo up; exec sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    run.wait_event("serving")
    done = srt("restart", run.job_dir, "svc", "--force")
    assert done.returncode == 1
    run.wait(30)
    assert run.code == 1
    assert run.result()["cause"]["kind"] == "exited_before_ready"


def test_the_socket_is_the_users_alone(jobs: Jobs, port: int) -> None:
    run = jobs.start(recipe(port))
    run.wait_event("serving")
    sock_path = os.path.join(run.job_dir, "control.sock")
    assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.stat(sock_path).st_mode)

    # Even when the file mode lets another user in, the orchestrator checks who connected.
    os.chmod(sock_path, 0o666)
    os.chmod(run.job_dir, 0o755)
    read_fd, write_fd = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        os.close(read_fd)
        try:
            with short_address(run.job_dir) as address:  # opened while still root
                os.setgid(65534)
                os.setuid(65534)
                # setuid made the process undumpable, which hides /proc/self/fd from it
                ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(address)
                    with contextlib.suppress(BrokenPipeError):  # refused before reading it
                        s.sendall(b'{"op": "restart", "unit": "web"}\n')
                    answer = s.makefile("rb").readline()
            os.write(write_fd, answer)
        except BaseException as exc:
            os.write(write_fd, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as fh:
        raw = fh.read()
    try:
        answer = json.loads(raw)
    except ValueError:
        pytest.fail(f"the other user's client failed: {raw!r}")
    os.waitpid(child, 0)
    assert answer == {
        "ok": False,
        "text": f"uid 65534 is not the job's user (uid {os.geteuid()})",
        "refused": True,
    }
    assert len(events_of(run, "launched", step="service_web")) == 1
    run.stop()
    run.wait(30)
    assert not os.path.exists(sock_path), "the socket goes with the orchestrator"


def test_a_job_directory_longer_than_a_socket_address(jobs: Jobs, port: int, tmp_path) -> None:
    deep = tmp_path / ("d" * 100) / ("e" * 100)
    run = jobs.start(recipe(port), job_dir=str(deep / "job"))
    run.wait_event("serving")
    assert len(os.path.join(run.job_dir, "control.sock")) > 108
    reply = ask(run.job_dir, Request("hello"), "srt hello", print)
    assert (
        reply.ok and reply.text == f"job ctl, orchestrator pid {run.state()['orchestrator']['pid']}"
    )
    run.stop()
    run.wait(30)


def test_a_bad_request_is_answered_not_fatal(jobs: Jobs, port: int) -> None:
    run = jobs.start(recipe(port))
    run.wait_event("serving")
    for line, why in (
        (b"not json\n", "the request is not a JSON object"),
        (b'{"op": "reboot", "unit": "web"}\n', "op must be one of hello, restart, stop"),
        (b'{"op": "restart"}\n', "unit must be a service name"),
    ):
        with socket.socket(socket.AF_UNIX) as s:
            with short_address(run.job_dir) as address:
                s.connect(address)
            s.sendall(line)
            with s.makefile("rb") as reader:
                answer = json.loads(reader.readline())
        assert answer["refused"] and why in answer["text"]
    # a client that connects and says nothing does not block the next one
    idle = socket.socket(socket.AF_UNIX)
    with short_address(run.job_dir) as address:
        idle.connect(address)
    assert srt("restart", run.job_dir, "web").returncode == 0
    idle.close()
    assert run.proc.poll() is None
    run.stop()
    run.wait(30)


def _fake_job(tmp_path: Path, host: str, slurm: bool) -> Path:
    """A job directory whose orchestrator (this test process) runs on ``host``, with a
    socket file nobody listens on: what a login node sees of a job on a batch node."""
    from srt_services.jobdir.layout import JobDir
    from srt_services.jobdir.state import VERSION, JobState, OrchestratorInfo, write_state

    job = tmp_path / "job"
    job.mkdir()
    me = OrchestratorInfo.this_process(time.time())
    me.host = host
    write_state(
        JobDir(str(job)),
        JobState(
            VERSION,
            "far",
            "7",
            "c" * 32,
            "slurm" if slurm else "local",
            "running",
            "serving",
            me,
            {},
            None,
            [],
        ),
    )
    s = socket.socket(socket.AF_UNIX)
    with short_address(str(job)) as address:
        s.bind(address)
    s.close()  # the file stays, nothing listens: connect() is refused
    return job


@pytest.mark.parametrize("slurm", [True, False])
def test_a_client_on_another_host_is_told_so_at_once(tmp_path: Path, slurm: bool) -> None:
    job = _fake_job(tmp_path, "batch-node-7", slurm)
    t0 = time.monotonic()
    with pytest.raises(ControlError) as err:
        ask(str(job), Request("restart", "web"), "srt restart DIR web", print)
    assert time.monotonic() - t0 < 2
    text = str(err.value)
    assert f"runs on batch-node-7 and this is {socket.gethostname()}" in text
    assert "only on the host that made it" in text
    if slurm:
        assert text.endswith(
            "Run it on that node: srun --jobid=7 --overlap -N1 -n1 --nodelist=batch-node-7"
            " srt restart DIR web"
        )
    else:
        assert text.endswith("Run it on batch-node-7: srt restart DIR web")


def test_a_job_that_cannot_make_its_socket_still_runs_and_says_why(jobs: Jobs, tmp_path) -> None:
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "control.sock").write_text("not a socket: srt must leave it alone\n")
    run = jobs.start(
        """
        schema: 2
        observability:
          metrics: false
        name: nosock
        services:
          - name: svc
            command: [sleep, "1000"]
        """,
        job_dir=str(job_dir),
    )
    run.wait_event("serving")
    (unavailable,) = events_of(run, "control_unavailable")
    assert "cannot bind a control socket" in unavailable["detail"]
    refused = srt("restart", run.job_dir, "svc")
    assert refused.returncode == 1
    assert "has no control socket" in refused.stderr
    assert "control_unavailable in events.jsonl" in refused.stderr
    run.stop()
    run.wait(30)
    assert (job_dir / "control.sock").read_text().startswith("not a socket")


def test_a_shell_pattern_selects_what_srt_logs_would(jobs: Jobs, port: int) -> None:
    """`srt restart J 'tick*'` restarts what `srt logs J 'tick*'` shows (refused before:
    no service of that name); the critical one it also matches is refused on its own."""
    run = jobs.start(
        recipe(
            port,
            """
          - name: ticker
            command: [bash, -c, "while true; do echo tick; sleep 0.2; done"]
          - name: tick-tock
            command: [bash, -c, "echo up; exec sleep 1000"]
            readiness: {log: {pattern: up}}
        """,
        )
    )
    run.wait_event("serving")
    before = {s: pid_of(run, s) for s in ("service_ticker", "service_tick-tock", "service_web")}
    done = srt("restart", run.job_dir, "tick*")
    assert done.returncode == 0, done.stderr
    assert "'tick*' selects ticker, tick-tock" in done.stderr
    assert done.stdout.count("restarted in ") == 2
    after = {s: pid_of(run, s) for s in before}
    assert after["service_ticker"] != before["service_ticker"]
    assert after["service_tick-tock"] != before["service_tick-tock"]
    assert after["service_web"] == before["service_web"]
    assert sorted(e["unit"] for e in events_of(run, "restarted")) == ["tick-tock", "ticker"]

    mixed = srt("stop", run.job_dir, "*o*")  # tick-tock and core (critical): one refused
    assert mixed.returncode == 1
    assert "stopped service_tick-tock" in mixed.stdout
    assert "refused: services[core] is critical" in mixed.stderr
    nothing = srt("restart", run.job_dir, "zz*")
    assert nothing.returncode == 1
    assert "no service, role or step named 'zz*' (units: core, tick-tock, ticker, web)" in (
        nothing.stderr
    )
    run.stop()
    run.wait(30)
