"""The test clusters behave the way srt's Slurm launcher relies on.

Service steps are `srun --overlap` steps named after the service; a single step can be
signalled (graceful stop) without ending the job; cancelling the job ends every process
it started, daemonised ones included; on the 3-node cluster nodes have their own IP and
hostname and can talk to each other over TCP.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import socket
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slurm

# the venv's interpreter: the nodes share the host filesystem, so it runs there as is
PYTHON = sys.executable


@pytest.fixture(params=["slurm_cluster_1", "slurm_cluster_3"])
def cluster(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


@pytest.fixture
def work(cluster: Any, request: pytest.FixtureRequest) -> Path:
    """A per-test directory under the cluster dir, which every node can reach."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)
    w = Path(cluster.dir) / "jobs" / f"{tag}-{time.time_ns()}"
    w.mkdir(parents=True)
    return w


def _write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _assert_all_gone(sh: Any, job: str, pids: set[int], wait_until: Callable[..., Any]) -> None:
    """Every recorded PID and every process carrying the job id is dead or a zombie."""
    wait_until(
        lambda: not [p for p in pids if sh.alive(p)],
        timeout=sh.cluster.kill_wait + 15,
        what=f"job {job} processes {sorted(p for p in pids if sh.alive(p))} to exit",
    )
    assert sh.job_pids(job) == set()


def test_service_steps_signal_and_cancel(
    cluster: Any, work: Path, slurm_env: Any, wait_until: Callable[..., Any]
) -> None:
    sh = slurm_env(cluster)
    first, last = cluster.nodes[0], cluster.nodes[-1]
    _write(
        work / "daemon.sh",
        f"""
        trap '' TERM
        echo $$ > {work}/daemon.pid
        while :; do sleep 0.2; done
        """,
    )
    _write(
        work / "sleeper.sh",
        f"""
        echo $$ > {work}/sleeper.pid
        setsid -f bash {work}/daemon.sh </dev/null >/dev/null 2>&1
        exec sleep 1000
        """,
    )
    _write(
        work / "trapper.sh",
        f"""
        trap 'echo "$SLURM_STEP_ID" >> {work}/trapped' TERM
        echo $$ > {work}/trapper.pid
        while :; do sleep 0.1; done
        """,
    )
    script = _write(
        work / "job.sh",
        f"""
        #!/bin/bash
        #SBATCH --job-name=svc-test
        #SBATCH --nodes={len(cluster.nodes)}
        #SBATCH --output={work}/job.out
        echo $$ > {work}/batch.pid
        srun --overlap --nodes=1 --ntasks=1 --nodelist={first} --job-name=service_sleep \\
            bash {work}/sleeper.sh &
        srun --overlap --nodes=1 --ntasks=1 --nodelist={last} --job-name=service_trap \\
            bash {work}/trapper.sh &
        wait
        """,
    )
    t0 = time.monotonic()
    job = sh.sbatch(script)
    names = ("batch", "sleeper", "daemon", "trapper")
    pid_files = {n: work / f"{n}.pid" for n in names}
    wait_until(
        lambda: all(_read_pid(f) for f in pid_files.values()),
        timeout=30,
        what=f"the steps of job {job} to start (job.out: {work}/job.out)",
    )
    print(f"sbatch -> both service steps running: {time.monotonic() - t0:.2f}s")
    pids = {n: _read_pid(f) or 0 for n, f in pid_files.items()}

    steps = wait_until(
        lambda: (s := sh.steps(job)) and len(s) >= 2 and s, timeout=10, what="squeue -s"
    )
    by_name = {name: (step, nodes) for step, (name, nodes) in steps.items()}
    assert {"service_sleep", "service_trap"} <= set(by_name), steps
    assert by_name["service_sleep"][1] == first
    assert by_name["service_trap"][1] == last
    trap_step = by_name["service_trap"][0]
    assert trap_step.startswith(f"{job}.")

    # graceful stop of one step: the trap runs, and because it does not exit, the step lives
    t1 = time.monotonic()
    # scancel on a step sometimes exits 1 ("Invalid job id") although it signalled; ignore rc
    sh.run("scancel", "--signal=TERM", trap_step, check=False)
    trapped = wait_until(
        lambda: (work / "trapped").exists() and (work / "trapped").read_text().strip(),
        timeout=10,
        what="the TERM trap in the service_trap step",
    )
    print(f"scancel --signal=TERM -> trap ran: {time.monotonic() - t1:.3f}s")
    assert trapped.split()[0] == trap_step.split(".")[1]
    time.sleep(0.5)
    assert sh.alive(pids["trapper"])
    assert trap_step in sh.steps(job)
    assert sh.job_state(job) == "RUNNING"

    # the setsid'd daemon left the step's process tree and session, but not its cgroup
    daemon_sid = Path(f"/proc/{pids['daemon']}/stat").read_text().rsplit(")", 1)[1].split()[3]
    assert int(daemon_sid) == pids["daemon"]
    everything = set(pids.values()) | sh.job_pids(job)
    assert pids["daemon"] in everything

    t2 = time.monotonic()
    sh.run("scancel", job)
    _assert_all_gone(sh, job, everything, wait_until)
    print(f"scancel job -> all processes gone: {time.monotonic() - t2:.2f}s")
    wait_until(lambda: sh.job_state(job) == "CANCELLED", timeout=15, what="CANCELLED state")


def test_three_nodes_have_own_ip_hostname_and_talk_tcp(
    slurm_cluster_3: Any, slurm_env: Any, wait_until: Callable[..., Any]
) -> None:
    cluster = slurm_cluster_3
    sh = slurm_env(cluster)
    work = Path(cluster.dir) / "jobs" / f"net-{time.time_ns()}"
    work.mkdir(parents=True)
    n2_ip = cluster.node_ips["n2"]
    port = 8000  # every node has its own port space, so a fixed port is fine
    _write(
        work / "who.sh",
        f"""
        echo "$(hostname) $SLURMD_NODENAME $(hostname -I) $$" > {work}/who.$SLURMD_NODENAME
        """,
    )
    _write(
        work / "server.py",
        f"""
        import os, socket
        srv = socket.create_server(({n2_ip!r}, {port}))
        srv.settimeout(30)
        with open({str(work / "server.pid")!r}, "w") as fh:
            fh.write(f"{{os.getpid()}}\\n")
        for _ in range(2):  # one client on n3, one from the test process
            conn, peer = srv.accept()
            with conn:
                conn.sendall(f"hello from {{socket.gethostname()}} to {{peer[0]}}".encode())
        """,
    )
    _write(
        work / "client.py",
        f"""
        import os, socket
        with socket.create_connection(({n2_ip!r}, {port}), timeout=10) as s:
            data = s.recv(200).decode()
        with open({str(work / "client.out")!r}, "w") as fh:
            fh.write(f"{{socket.gethostname()}} {{os.getpid()}} {{data}}\\n")
        """,
    )
    script = _write(
        work / "job.sh",
        f"""
        #!/bin/bash
        #SBATCH --job-name=net-test
        #SBATCH --nodes=3
        #SBATCH --output={work}/job.out
        echo $$ > {work}/batch.pid
        srun --overlap --nodes=3 --ntasks=3 --ntasks-per-node=1 bash {work}/who.sh
        srun --overlap --nodes=1 --ntasks=1 --nodelist=n2 --job-name=service_tcp \\
            {PYTHON} {work}/server.py &
        for i in $(seq 200); do [ -s {work}/server.pid ] && break; sleep 0.05; done
        srun --overlap --nodes=1 --ntasks=1 --nodelist=n3 --job-name=client \\
            {PYTHON} {work}/client.py
        wait
        """,
    )
    job = sh.sbatch(script)
    wait_until((work / "client.out").exists, timeout=30, what="the client on n3")
    server_pid = _read_pid(work / "server.pid")
    with socket.create_connection((n2_ip, port), timeout=10) as conn:
        from_host = conn.recv(200).decode()
    wait_until(
        lambda: sh.job_state(job) not in ("PENDING", "RUNNING", "COMPLETING"),
        timeout=20,
        what=f"job {job} to finish",
    )
    assert sh.job_state(job) == "COMPLETED", (work / "job.out").read_text()

    who = {}
    pids = {p for p in (server_pid, _read_pid(work / "batch.pid")) if p}
    for node in cluster.nodes:
        hostname, slurm_name, ip, pid = (work / f"who.{node}").read_text().split()
        assert slurm_name == node
        who[node] = (hostname, ip)
        pids.add(int(pid))
    assert {n: h for n, (h, _) in who.items()} == {"n1": "n1", "n2": "n2", "n3": "n3"}
    ips = {n: ip for n, (_, ip) in who.items()}
    assert ips == cluster.node_ips
    assert len(set(ips.values())) == 3
    assert all(
        ipaddress.ip_address(ip) in ipaddress.ip_network("10.0.0.0/8") for ip in ips.values()
    )

    client_host, client_pid, *reply = (work / "client.out").read_text().split()
    pids.add(int(client_pid))
    assert client_host == "n3"
    assert " ".join(reply) == f"hello from n2 to {cluster.node_ips['n3']}"
    assert from_host.startswith("hello from n2 to ")
    _assert_all_gone(sh, job, pids, wait_until)


def test_config_matches_what_was_asked(cluster: Any, slurm_env: Any) -> None:
    conf = slurm_env(cluster).config()
    assert conf["KillWait"] == f"{cluster.kill_wait} sec"
    assert conf["SLURM_CONF"] == str(cluster.slurm_conf)
    assert conf["ProctrackType"] == f"proctrack/{cluster.proctrack}"
    assert conf["FirstJobId"] == str(cluster.first_job_id)


def test_clusters_coexist_and_up_is_idempotent(
    slurm_cluster_1: Any, slurm_cluster_3: Any, slurm_cluster_api: Any
) -> None:
    one, three = slurm_cluster_1, slurm_cluster_3
    assert one.ctld_port != three.ctld_port
    assert one.first_job_id != three.first_job_id
    assert one.mode == "local"
    assert three.mode == "netns"
    assert three.nodes == ["n1", "n2", "n3"]
    t0 = time.monotonic()
    again = slurm_cluster_api.up(three.dir, nodes=3, mode="netns", name=three.name)
    assert time.monotonic() - t0 < 5
    assert again == three
    assert slurm_cluster_api.is_up(one.dir)


def test_failed_up_leaves_nothing_behind(
    slurm_cluster_1: Any, slurm_cluster_api: Any, slurm_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bring-up that dies after creating namespaces and daemons cleans up after itself."""
    api = slurm_cluster_api
    pid_alive = slurm_env(slurm_cluster_1).alive
    d = Path(f"/tmp/srt-slurm-fail{os.getpid()}")
    name = f"f{os.getpid() % 10**6}"
    started: list[int] = []

    def broken_wait_idle(spec: Any, timeout: float) -> None:
        started.extend(p for p in api._daemon_pids(spec).values() if p)
        raise api.ClusterError("injected failure")

    monkeypatch.setattr(api, "_wait_idle", broken_wait_idle)
    try:
        with pytest.raises(api.ClusterError, match="injected failure"):
            api.up(d, nodes=2, mode="netns", name=name)
        assert len(started) == 4  # munged, slurmctld, 2 x slurmd
        assert not [p for p in started if pid_alive(p)]
        assert not list(Path("/run/netns").glob(f"{name}-*"))
        assert not Path(f"/sys/class/net/{name}-br").exists()
        assert not api.is_up(d)
        api.down(d)  # a second down is harmless
    finally:
        monkeypatch.undo()
        api.down(d)
        shutil.rmtree(d, ignore_errors=True)
