"""etcd for real: `srt run` with the Debian/PyPI etcd server, workers that use it, faults.

Each test uses ports the kernel just handed out, so parallel sessions that run their own
etcd on 2379 never collide with these. Every test ends with the no-survivors check.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from srt_services.extend import JobPaths
from srt_services.testing.jobs import events_of, run_recipe, start_srt
from srt_services.testing.survivors import assert_no_survivors

HERE = Path(__file__).resolve().parent
CLIENT = str(HERE / "etcd_client.py")
ETCD = shutil.which("etcd")

pytestmark = [
    pytest.mark.component,
    pytest.mark.skipif(ETCD is None, reason="needs the etcd server (apt-get install etcd-server)"),
]


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return str(path)


def recipe(etcd_entry: str, worker: list[str], benchmark: list[str] | None) -> str:
    """A static-frontend job (no implied etcd) whose one worker uses the declared etcd."""
    bench = f"benchmark: {{type: command, command: {json.dumps(benchmark)}}}\n" if benchmark else ""
    return (
        "schema: 2\n"
        "name: etcdrt\n"
        "observability: {metrics: false}\n"
        "resources: {gpus_per_node: 1}\n"
        'frontend: {type: sglang, command: [sleep, "600"]}\n'
        "roles:\n"
        "  agg:\n"
        f"    command: {json.dumps(worker)}\n"
        "    readiness: {log: {pattern: 'etcd worker ready'}, timeout_seconds: 30}\n"
        f"{bench}"
        "services:\n"
        f"  - {etcd_entry}\n"
    )


def test_a_worker_writes_and_reads_through_etcd_endpoints(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    cp, pp = srt_free_port(), srt_free_port()
    job_dir = str(tmp_path / "job")
    text = recipe(
        f"{{name: etcd, type: etcd, options: {{client_port: {cp}, peer_port: {pp}}}}}",
        [sys.executable, CLIENT, "worker", "srt/test/worker", "agg_0-was-here"],
        [sys.executable, CLIENT, "check", "srt/test/worker", "agg_0-was-here"],
    )
    job = run_recipe(write(tmp_path, text), job_dir, timeout=60)
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert job.result()["cause"]["kind"] == "benchmark_exit"
        names = [(e["event"], e.get("step")) for e in job.events()]
        # the plane is ready before any worker exists
        assert names.index(("ready", "service_etcd")) < names.index(("launched", "agg_0"))
        assert f"via http://127.0.0.1:{cp}" in job.log("agg_0")
        assert "check srt/test/worker: 'agg_0-was-here'" in job.log("benchmark")
        (stopped,) = events_of(job, "exited", step="service_etcd")
        assert stopped["code"] in (0, 143)  # SIGTERM at teardown, nothing else
    finally:
        assert_no_survivors(job_dir)


def test_the_wal_is_node_local_while_the_job_runs_and_gone_after(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    """The spec's "fresh data dir on node-local /tmp each job": under the site's
    [storage] node_local, never in the (shared, often NFS) job directory."""
    local = tmp_path / "node-local"
    local.mkdir()
    site = tmp_path / "site.toml"
    site.write_text(f'[storage]\nnode_local = "{local}"\n')
    cp, pp = srt_free_port(), srt_free_port()
    job_dir = str(tmp_path / "job")
    node_local = Path(JobPaths(job_dir, "job", str(local)).local_job_dir)
    data = node_local / "service_etcd" / "data"
    text = recipe(
        f"{{name: etcd, type: etcd, options: {{client_port: {cp}, peer_port: {pp}}}}}",
        [sys.executable, CLIENT, "worker", "srt/test/local", "x"],
        ["bash", "-c", f"test -d {data}/member && echo wal-is-node-local"],
    )
    job = run_recipe(write(tmp_path, text), job_dir, timeout=60, env={"SRT_SITE_CONFIG": str(site)})
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert "wal-is-node-local" in job.log("benchmark")
        assert not os.path.exists(os.path.join(job_dir, "work", "service_etcd", "data"))
        assert not node_local.exists(), "the node-local data dir outlived the job"
    finally:
        assert_no_survivors(job_dir)


@pytest.fixture
def outside_etcd(tmp_path: Path, srt_free_port: Callable[[], int]) -> Iterator[str]:
    """An etcd the job does not own: started here, stopped here, by PID."""
    assert ETCD is not None
    cp, pp = srt_free_port(), srt_free_port()
    client, peer = f"http://127.0.0.1:{cp}", f"http://127.0.0.1:{pp}"
    log = open(tmp_path / "outside-etcd.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            ETCD, "--name", "outside", "--data-dir", str(tmp_path / "outside-data"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"outside={peer}",
        ],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"{client}/health", timeout=1) as r:
                    if json.load(r).get("health") == "true":
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "outside-etcd.log").read_text()
            assert time.monotonic() < deadline, "the outside etcd did not become healthy"
            time.sleep(0.05)
        yield client
        assert proc.poll() is None, "the job stopped an etcd it does not own"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
        log.close()


def test_external_etcd_is_used_and_left_running(tmp_path: Path, outside_etcd: str) -> None:
    job_dir = str(tmp_path / "job")
    text = recipe(
        f"{{name: etcd, type: etcd, external: '{outside_etcd}'}}",
        [sys.executable, CLIENT, "worker", "srt/test/ext", "through-the-outside"],
        [sys.executable, CLIENT, "check", "srt/test/ext", "through-the-outside"],
    )
    job = run_recipe(write(tmp_path, text), job_dir, timeout=60)
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert events_of(job, "external", unit="etcd")[0]["address"] == outside_etcd
        assert not events_of(job, "launched", unit="etcd")
        assert f"via {outside_etcd}" in job.log("agg_0")
        # the key really lives in the outside etcd, which is still serving after the job
        env = {**os.environ, "ETCD_ENDPOINTS": outside_etcd}
        asked = [sys.executable, CLIENT, "check", "srt/test/ext", "through-the-outside"]
        assert subprocess.run(asked, env=env, check=False).returncode == 0
    finally:
        assert_no_survivors(job_dir)


def test_etcd_killed_mid_run_tears_the_job_down(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    cp, pp = srt_free_port(), srt_free_port()
    job_dir = str(tmp_path / "job")
    text = recipe(
        f"{{name: etcd, type: etcd, options: {{client_port: {cp}, peer_port: {pp}}}}}",
        [sys.executable, CLIENT, "worker", "srt/test/kill", "x"],
        None,  # manual: the job serves until something ends it
    )
    job = start_srt(["run", write(tmp_path, text)], job_dir)
    try:
        job.wait_event("serving", timeout=30)
        state = job.state()["instances"]["service_etcd"]
        pid = state["pid"]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            assert os.path.basename(fh.read().split(b"\0")[0]) == b"etcd"  # not a reused PID
        os.kill(pid, signal.SIGKILL)
        job.wait(timeout=60)
        assert job.code == 1, job.stdout + job.stderr
        (stop,) = events_of(job, "stop_requested")
        assert stop["cause"] == {
            "kind": "critical_service_exit", "unit": "etcd", "step": "service_etcd",
            "node": "node0", "code": 137, "signal": 9,
        }  # fmt: skip
        assert job.result()["cause"]["kind"] == "critical_service_exit"
        assert "critical services[etcd] (service_etcd) exited on node0 after it was ready" in (
            job.stdout + job.stderr
        )
        # the worker and frontend were stopped because of it, not left serving
        assert events_of(job, "exited", step="agg_0")
        assert events_of(job, "exited", step="frontend")
    finally:
        if job.code is None:
            job.signal(signal.SIGKILL)
            job.wait(10)
        assert_no_survivors(job_dir)


def test_a_missing_binary_fails_before_any_worker_starts(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    cp, pp = srt_free_port(), srt_free_port()
    job_dir = str(tmp_path / "job")
    text = recipe(
        "{name: etcd, type: etcd, options: {binary: /nonexistent/srt-test/etcd,"
        f" client_port: {cp}, peer_port: {pp}}}}}",
        ["sleep", "600"],
        ["true"],
    )
    job = run_recipe(write(tmp_path, text), job_dir, timeout=60)
    try:
        assert job.code == 1
        out = job.stdout + job.stderr
        assert "cannot find the etcd server binary /nonexistent/srt-test/etcd" in out
        assert "apt-get install etcd-server" in out
        assert job.result()["cause"]["kind"] == "exited_before_ready"
        assert job.result()["cause"]["code"] == 127
        assert [e.get("step") for e in job.events() if e["event"] == "launched"] == ["service_etcd"]
    finally:
        assert_no_survivors(job_dir)
