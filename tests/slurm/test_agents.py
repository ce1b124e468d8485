"""The node-agent launcher (``slurm.launcher: agents``) on the 3-node test cluster.

One ``srun`` step runs an srt agent on every node; the agents run the instances. Each test
submits with ``srt apply`` and ends, through the ``submit`` fixture, by proving nothing of
the job survived on any node (no process with its SLURM_JOB_ID or its cookie, no
node-local tree). The faults: an agent that dies is a lost node; an orchestrator that is
killed or frozen makes every agent stop its instances; a node whose agent never starts
fails the job at its start; ``scancel`` and ``srt stop`` leave nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slurm


@pytest.fixture
def cluster(slurm_cluster_3: Any) -> Any:
    return slurm_cluster_3


@pytest.fixture
def cluster_env(cluster: Any) -> dict[str, str]:
    return dict(cluster.env())


def srt(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def _trap(name: str, marker: Path) -> str:
    return (
        f"trap 'echo {name} $(date +%s.%N) >> {marker}; exit 0' TERM; echo up;"
        " while true; do sleep 0.05; done"
    )


def _site(tmp_path: Path, **slurm: float) -> dict[str, str]:
    """An environment whose site config sets the agents' bounds (the batch script exports
    it to the orchestrator)."""
    path = tmp_path / "site.toml"
    path.write_text("[slurm]\n" + "".join(f"{k} = {v}\n" for k, v in slurm.items()))
    return {"SRT_SITE_CONFIG": str(path)}


def _agent_pids(job: Any) -> dict[str, int]:
    """node -> the PID of its agent, from the agents' own logs."""
    out = {}
    for log in (job.job_dir / "logs").glob("srt-agent-*.out"):
        found = re.search(r"srt-agent\[(\d+)\]: serving (\S+)", log.read_text())
        if found:
            out[found.group(2)] = int(found.group(1))
    return out


def _agent_log(job: Any, node: str) -> str:
    return (job.job_dir / "logs" / f"srt-agent-{node}.out").read_text()


def test_agents_run_the_job_and_status_logs_restart_and_stop_work_as_on_steps(
    submit: Any, shell: Any, cluster: Any, cluster_env: dict[str, str], tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    job = submit(
        f"""
        schema: 2
        name: agents
        observability: {{metrics: false}}
        slurm: {{launcher: agents, signal_before_end_seconds: 0}}
        services:
          - name: web
            nodes: 1
            command: [bash, -c, "echo web up on $(hostname); i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]
            readiness: {{log: {{pattern: web up}}}}
          - name: base
            nodes: 2
            critical: true
            command: [bash, -c, "echo x > {{local_dir}}/wal; echo $(hostname) $SLURM_JOB_ID >> {seen}; setsid sleep 1000 & echo base up; exec sleep 1000"]
            readiness: {{log: {{pattern: base up}}}}
          - name: pinned
            cpus_per_task: 1
            command: [bash, -c, "echo pinned up; exec sleep 1000"]
            readiness: {{log: {{pattern: pinned up}}}}
        """
    )
    env = cluster_env
    job.wait_event("serving")
    live = shell.steps(job.job_id)
    steps = {name for name, _ in live.values()}
    assert steps == {"srt-agents", "batch", "service_pinned"}, (
        "one step for every agent, one for the instance that needs srun's --cpus-per-task"
    )
    (agents_step,) = [i for i, (name, _) in live.items() if name == "srt-agents"]
    assert agents_step == f"{job.job_id}.0", (
        "the agents start with the allocation: no step of the job ran before theirs (the"
        " nodes' addresses come in the agents' hellos, not from a lookup step)"
    )
    assert "the agents start with the orchestrator instead" not in job.sbatch_log(), (
        "the batch script started them before the orchestrator, which took them over"
    )
    ips = json.loads((job.job_dir / "nodes.json").read_text())["ips"]
    assert ips == {n: ip for n, ip in cluster.node_ips.items() if n in ips} and len(ips) == 3
    vias = {e["step"]: e.get("via") for e in job.events("launched")}
    assert vias == {
        "service_web": "agent",
        "service_base_n2": "agent",
        "service_base_n3": "agent",
        "service_pinned": "step",
    }
    lines = sorted(seen.read_text().split("\n")[:-1])
    assert lines == [f"n2 {job.job_id}", f"n3 {job.job_id}"], "job-level Slurm variables"

    status = json.loads(srt("status", str(job.job_dir), "--json", env=env).stdout)
    rows = {r["step"]: r for r in status["instances"]}
    assert all(r["running"] and r["state"] == "ready" for r in rows.values()), rows
    web_pid = rows["service_web"]["pid"]
    assert web_pid and shell.alive(web_pid), "the PID is the service's own, on its node"
    assert rows["service_base_n2"]["slurm_step"] == rows["service_base_n3"]["slurm_step"]

    logs = srt("logs", str(job.job_dir), env=env).stdout.splitlines()
    assert any(re.fullmatch(r"service_web +\| web up on n\d", line) for line in logs), logs

    restarted = srt("restart", str(job.job_dir), "web", env=env)
    assert restarted.returncode == 0, restarted.stderr + job.sbatch_log()
    web = job.srt_state().instances["service_web"]
    assert web.attempt == 2 and web.state == "ready" and web.pid != web_pid
    (first,) = job.events("exited", step="service_web", attempt=1)
    assert first["signal"] == 15, "the agent stopped the first attempt with SIGTERM"

    down = srt("stop", str(job.job_dir), "web", env=env)
    assert down.returncode == 0, down.stderr + job.sbatch_log()
    assert "stays down" in down.stdout
    assert not shell.alive(web.pid), "the agent stopped the service's own process"
    time.sleep(1.0)  # longer than the restart backoff: the policy must not bring it back
    status = json.loads(srt("status", str(job.job_dir), "--json", env=env).stdout)
    row = {r["step"]: r for r in status["instances"]}["service_web"]
    assert row["state"] == "stopped" and not row["running"], row
    assert len(job.events("launched", step="service_web")) == 2
    back = srt("restart", str(job.job_dir), "web", env=env)
    assert back.returncode == 0, back.stderr + job.sbatch_log()
    assert job.srt_state().instances["service_web"].state == "ready"

    refused = srt("stop", str(job.job_dir), "base", env=env)
    assert refused.returncode == 1 and "critical" in refused.stderr

    stopped = srt("stop", str(job.job_dir), env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    result = job.result()
    assert result["status"] == "stopped" and result["cause"]["kind"] == "user_stop"
    assert result["unkillable"] == []
    for node in ("n1", "n2", "n3"):
        assert "the orchestrator is done; exiting" in _agent_log(job, node)
    job.assert_nothing_left()
    assert not os.path.exists(job.node_local()), "the agents removed the node-local tree"


def test_an_agent_that_dies_is_a_lost_node(submit: Any, tmp_path: Path) -> None:
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: lost
        observability: {{metrics: false}}
        slurm: {{launcher: agents, signal_before_end_seconds: 0}}
        services:
          - name: others
            nodes: 2
            command: [bash, -c, "{_trap("others", marker)}"]
            readiness: {{log: {{pattern: up}}}}
          - name: store
            nodes: 1
            critical: true
            command: [bash, -c, "echo up; sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    job.wait_event("serving")
    node = job.events("launched", unit="store")[0]["node"]
    os.kill(_agent_pids(job)[node], signal.SIGKILL)
    job.wait_done()
    cause = job.result()["cause"]
    assert (cause["kind"], cause["unit"], cause["node"], cause["code"]) == (
        "critical_service_exit",
        "store",
        node,
        255,
    )
    assert cause["reason"].startswith(f"node {node} lost: ")
    assert f"node {node} lost" in cause["message"]
    (exited,) = job.events("exited", step="service_store")
    assert exited["reason"] == cause["reason"]
    assert len(marker.read_text().splitlines()) == 2, "the other nodes' services were stopped"


def test_a_killed_orchestrator_makes_every_agent_stop_its_instances(
    submit: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: orphaned
        observability: {{metrics: false}}
        slurm: {{launcher: agents, signal_before_end_seconds: 0}}
        services:
          - name: a
            nodes: 3
            command: [bash, -c, "setsid sleep 1000 & {_trap("a", marker)}"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    job.wait_event("serving")
    os.kill(job.srt_state().orchestrator.pid, signal.SIGKILL)
    job.wait_done()
    job.assert_nothing_left()
    # the agents notice the loss at once (their connections end), but the orchestrator was
    # the batch script's process, so Slurm ends the job and kills its steps in the same
    # moment: on a loaded machine an agent may be killed before it writes its note (seen in
    # a CI run). What this test proves is that nothing survives a kill -9 and that the loss
    # reached the agents; the stop by the agents alone, with the job still running, is what
    # the frozen-orchestrator test below proves.
    logs = {node: _agent_log(job, node) for node in ("n1", "n2", "n3")}
    assert any("orchestrator lost" in text for text in logs.values()), logs


def test_a_frozen_orchestrator_is_noticed_by_the_heartbeat(
    submit: Any, shell: Any, tmp_path: Path
) -> None:
    """SIGSTOP: the orchestrator's sockets stay open and its job stays RUNNING in Slurm;
    only the silence tells the agents, which stop every instance on their own."""
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: frozen
        observability: {{metrics: false}}
        slurm: {{launcher: agents, signal_before_end_seconds: 0}}
        services:
          - name: a
            nodes: 3
            command: [bash, -c, "{_trap("a", marker)}"]
            readiness: {{log: {{pattern: up}}}}
        """,
        extra_env=_site(tmp_path, agent_lost_after_seconds=2),
    )
    job.wait_event("serving")
    orch = job.srt_state().orchestrator.pid
    instances = [job.instance_pid(f"service_a_{n}") for n in ("n1", "n2", "n3")]
    os.kill(orch, signal.SIGSTOP)
    try:
        # within the bound: 2 s of silence, the grace, the last sweep
        for pid in instances:
            deadline = time.monotonic() + 2 + 10 + 5
            while shell.alive(pid):
                assert time.monotonic() < deadline, f"pid {pid} outlived the bound"
                time.sleep(0.1)
        assert job.state() == "RUNNING", "the job is still there: the agents acted alone"
        assert len(marker.read_text().splitlines()) == 3, "each got its stop signal first"
        for node in ("n1", "n2", "n3"):
            assert "no word from the orchestrator for 2s" in _agent_log(job, node)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(orch, signal.SIGKILL)
            os.kill(orch, signal.SIGCONT)
    job.wait_done()


@pytest.fixture
def broken_agent_on_n3(cluster: Any) -> Iterator[str]:
    """n3 cannot run the srt agent: its module is replaced by one that exits, in n3's own
    mount namespace (the node's slurmd and its steps run there; the host is untouched)."""
    import srt_services.launch.agent.__main__ as agent_main

    slurmd = int((Path(cluster.dir) / "run" / "slurmd-n3.pid").read_text())
    target = agent_main.__file__
    broken = Path(cluster.dir) / "broken-agent.py"
    broken.write_text('raise SystemExit("srt agent unavailable on this node")\n')
    ns = f"--mount=/proc/{slurmd}/ns/mnt"
    subprocess.run(["nsenter", ns, "mount", "--bind", str(broken), target], check=True)
    try:
        yield "n3"
    finally:
        subprocess.run(["nsenter", ns, "umount", target], check=True)


def test_a_node_whose_agent_never_starts_fails_the_job_at_its_start(
    submit: Any, broken_agent_on_n3: str, tmp_path: Path
) -> None:
    job = submit(
        """
        schema: 2
        name: noagent
        observability: {metrics: false}
        slurm: {launcher: agents, signal_before_end_seconds: 0}
        services:
          - name: a
            nodes: 3
            command: [bash, -c, "echo up; sleep 1000"]
        """,
        extra_env=_site(tmp_path, agent_start_timeout_seconds=20),
    )
    job.wait_done()
    cause = job.result()["cause"]
    assert (cause["kind"], cause["node"]) == ("launcher_failed", broken_agent_on_n3)
    assert cause["message"].startswith("the srt agent did not start on n3:")
    assert "srt agent unavailable on this node" in cause["message"]
    assert not job.events("launched"), "nothing starts on a job whose nodes are not all there"


def test_scancel_stops_every_agents_instance_inside_killwait(
    submit: Any, shell: Any, cluster: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: cancelled
        observability: {{metrics: false}}
        slurm: {{launcher: agents, signal_before_end_seconds: 0}}
        services:
          - name: a
            nodes: 3
            command: [bash, -c, "setsid sleep 1000 & {_trap("a", marker)}"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    job.wait_event("serving")
    t0 = time.monotonic()
    shell.run("scancel", job.job_id)
    assert job.wait_done() == "CANCELLED"
    elapsed = time.monotonic() - t0
    assert elapsed < cluster.kill_wait + 3, f"took {elapsed:.1f}s, KillWait {cluster.kill_wait}s"
    times = [float(line.split()[1]) for line in marker.read_text().splitlines()]
    assert len(times) == 3 and max(times) - min(times) < 1.0
    assert job.result()["cause"]["kind"] == "signal"
    job.assert_nothing_left()
