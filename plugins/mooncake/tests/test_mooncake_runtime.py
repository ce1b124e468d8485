"""Mooncake for real: `srt run` with the PyPI master and store service, workers that use the
pool through the stores' REST APIs, an external master, and faults.

Each test takes ports the kernel just handed out: Mooncake's metadata server and stores bind
0.0.0.0 whatever they are told, so two virtual nodes cannot share a port here, and other
sessions on this machine may run their own Mooncake on the defaults. Segments are 64 MB.
Every test ends with the no-survivors check.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from srt_services.testing.jobs import JobRun, events_of, run_recipe, start_srt
from srt_services.testing.survivors import assert_no_survivors

HERE = Path(__file__).resolve().parent
CLIENT = str(HERE / "mooncake_client.py")
PY = sys.executable
SIZES = "global_segment_size: 64MB, local_buffer_size: 16MB"

pytestmark = [pytest.mark.component, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _needs_mooncake(mooncake: dict[str, str]) -> None:
    """Every test here runs the real master and stores."""


@dataclass
class Ports:
    rpc: int
    metadata: int
    metrics: int
    store_a: int
    store_b: int
    frontend: int


@pytest.fixture
def ports(srt_free_port: Callable[[], int]) -> Ports:
    return Ports(*(srt_free_port() for _ in range(6)))


def master_entry(p: Ports) -> str:
    return (
        "  - name: mooncake-master\n    type: mooncake-master\n"
        f"    options: {{rpc_port: {p.rpc}, metadata_port: {p.metadata},"
        f" metrics_port: {p.metrics}}}\n"
    )


def pool_recipe(p: Ports, master: str, benchmark: bool = True) -> str:
    """A prefill and a decode worker, each next to its own store: each puts a key through
    its own node's store and reads it back through the other node's."""
    a = f"http://{{prefill_ips}}:{p.store_a}"
    b = f"http://{{decode_ips}}:{p.store_b}"
    prefill = [PY, CLIENT, "roundtrip", a, b, "k-prefill", "from-prefill", str(p.metrics)]
    decode = [PY, CLIENT, "roundtrip", b, a, "k-decode", "from-decode", str(p.metrics)]
    check = [PY, CLIENT, "check", f"{a},{b}", "k-prefill,k-decode", str(p.metrics), "2"]
    bench = f"benchmark: {{type: command, command: {json.dumps(check)}}}\n" if benchmark else ""
    ready = "readiness: {log: {pattern: 'mooncake worker ready'}, timeout_seconds: 60}"
    return (
        "schema: 2\n"
        "name: mooncake-rt\n"
        "resources: {gpus_per_node: 1}\n"
        "observability: {metrics: false}\n"
        'frontend: {type: sglang, command: [sleep, "600"], port: ' + str(p.frontend) + "}\n"
        "roles:\n"
        f"  prefill: {{command: {json.dumps(prefill)}, {ready}}}\n"
        f"  decode: {{command: {json.dumps(decode)}, {ready}}}\n"
        f"{bench}"
        "services:\n"
        f"{master}"
        "  - name: store-a\n    type: mooncake-store\n    placement: {node: prefill}\n"
        f"    options: {{port: {p.store_a}, {SIZES}}}\n"
        "  - name: store-b\n    type: mooncake-store\n    placement: {node: decode}\n"
        f"    options: {{port: {p.store_b}, {SIZES}}}\n"
    )


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return str(path)


def order(job: JobRun) -> list[tuple[str, str | None]]:
    return [(e["event"], e.get("step")) for e in job.events()]


def test_a_master_two_stores_and_workers_share_one_pool(tmp_path: Path, ports: Ports) -> None:
    job_dir = str(tmp_path / "job")
    job = run_recipe(write(tmp_path, pool_recipe(ports, master_entry(ports))), job_dir, timeout=120)
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert job.result()["cause"]["kind"] == "benchmark_exit"
        names = order(job)
        # master ready, then the stores (which register with it), then the workers
        master_ready = names.index(("ready", "service_mooncake-master"))
        assert master_ready < names.index(("launched", "service_store-a"))
        for store in ("service_store-a", "service_store-b"):
            assert names.index(("ready", store)) < names.index(("launched", "prefill_0"))
        # the stores stop before the master they unmount from, the workers before both
        assert names.index(("exited", "prefill_0")) < names.index(("exited", "service_store-a"))
        last_store = max(names.index(("exited", s)) for s in ("service_store-a", "service_store-b"))
        assert last_store < names.index(("exited", "service_mooncake-master"))
        for step in ("service_store-a", "service_store-b", "service_mooncake-master"):
            (stopped,) = events_of(job, "exited", step=step)
            assert stopped["code"] == 0, step  # a clean stop on SIGTERM, nothing else

        bench = job.log("benchmark")
        assert f"env MOONCAKE_MASTER=127.0.0.1:{ports.rpc}" in bench
        meta = f"http://127.0.0.1:{ports.metadata}/metadata"
        assert f"env MOONCAKE_TE_META_DATA_SERVER={meta}" in bench
        assert "env MOONCAKE_PROTOCOL=tcp" in bench
        assert "master counts 2 key(s)" in bench
        for role, ip, other in (
            ("prefill", "127.0.0.1", "127.0.0.2"),
            ("decode", "127.0.0.2", "127.0.0.1"),
        ):
            log = job.log(f"{role}_0")
            assert f"env MOONCAKE_MASTER=127.0.0.1:{ports.rpc}" in log
            assert f"env MOONCAKE_LOCAL_HOSTNAME={ip}" in log
            # its node's store owns the segment: the embedded client gives none
            assert "env MOONCAKE_GLOBAL_SEGMENT_SIZE=0" in log
            assert f"got 'from-{role}' via http://{other}:" in log
        # each store registered its own node's address, not an interface it picked
        assert "Store service started successfully on 127.0.0.2" in job.log("service_store-b")
        assert "listening on 127.0.0.2:" in job.log("service_store-b")
        config = json.loads(Path(job_dir, "work/service_store-a/mooncake-store.json").read_text())
        assert config["global_segment_size"] == 64 * 1024**2
        assert config["master_server_address"] == f"127.0.0.1:{ports.rpc}"
    finally:
        assert_no_survivors(job_dir)


@pytest.fixture
def outside_master(tmp_path: Path, ports: Ports, mooncake: dict[str, str]) -> Iterator[str]:
    """A master the job does not own: started here, stopped here, by PID."""
    binary = mooncake["mooncake_master"]
    log = open(tmp_path / "outside-master.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [
            binary, "--rpc_address=127.0.0.1", f"--rpc_port={ports.rpc}",
            "--enable_http_metadata_server=true", f"--http_metadata_server_port={ports.metadata}",
            "--metrics_host=127.0.0.1", f"--metrics_port={ports.metrics}",
        ],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                url = f"http://127.0.0.1:{ports.metrics}/health"
                with urllib.request.urlopen(url, timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "outside-master.log").read_text()
            assert time.monotonic() < deadline, "the outside master did not become healthy"
            time.sleep(0.02)
        yield f"127.0.0.1:{ports.rpc}"
        assert proc.poll() is None, "the job stopped a master it does not own"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(5)
        log.close()


def test_an_external_master_is_used_by_stores_and_workers_and_left_running(
    tmp_path: Path, ports: Ports, outside_master: str
) -> None:
    job_dir = str(tmp_path / "job")
    master = (
        f"  - {{name: mooncake-master, type: mooncake-master, external: '{outside_master}',"
        f" options: {{metadata_port: {ports.metadata}}}}}\n"
    )
    job = run_recipe(write(tmp_path, pool_recipe(ports, master)), job_dir, timeout=120)
    try:
        assert job.code == 0, job.stdout + job.stderr
        assert events_of(job, "external", unit="mooncake-master")[0]["address"] == outside_master
        assert not events_of(job, "launched", unit="mooncake-master")
        assert f"env MOONCAKE_MASTER={outside_master}" in job.log("prefill_0")
        config = json.loads(Path(job_dir, "work/service_store-b/mooncake-store.json").read_text())
        assert config["master_server_address"] == outside_master
        assert config["metadata_server"] == f"http://127.0.0.1:{ports.metadata}/metadata"
        # the keys live in the outside master's pool, which still serves after the job
        with urllib.request.urlopen(f"http://127.0.0.1:{ports.metrics}/health", timeout=5) as r:
            assert r.status == 200
    finally:
        assert_no_survivors(job_dir)


def test_a_store_without_a_master_is_refused_before_anything_starts(
    tmp_path: Path, ports: Ports
) -> None:
    job_dir = tmp_path / "job"
    text = pool_recipe(ports, "")
    job = run_recipe(write(tmp_path, text), str(job_dir), timeout=60)
    assert job.code == 2, job.stdout + job.stderr
    assert "services[store-a].type: needs a mooncake-master entry" in job.stderr
    assert not (job_dir / "events.jsonl").exists()


def test_a_missing_binary_fails_before_any_store_or_worker_starts(
    tmp_path: Path, ports: Ports
) -> None:
    job_dir = str(tmp_path / "job")
    master = master_entry(ports).replace(
        "options: {", "options: {binary: /nonexistent/srt-test/mooncake_master, "
    )
    job = run_recipe(write(tmp_path, pool_recipe(ports, master)), job_dir, timeout=60)
    try:
        assert job.code == 1
        out = job.stdout + job.stderr
        assert (
            "cannot find the mooncake-master server binary /nonexistent/srt-test/mooncake_master"
            in out
        )
        assert "pip install 'srt-mooncake[server]'" in out
        assert job.result()["cause"]["kind"] == "exited_before_ready"
        assert job.result()["cause"]["code"] == 127
        launched = [e.get("step") for e in job.events() if e["event"] == "launched"]
        assert launched == ["service_mooncake-master"]
    finally:
        assert_no_survivors(job_dir)


def test_a_store_killed_mid_run_fails_the_job(tmp_path: Path, ports: Ports) -> None:
    job_dir = str(tmp_path / "job")
    text = pool_recipe(ports, master_entry(ports), benchmark=False)  # serves until stopped
    job = start_srt(["run", write(tmp_path, text)], job_dir)
    try:
        job.wait_event("serving", timeout=60)
        pid = job.state()["instances"]["service_store-b"]["pid"]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            assert b"mc_store_rest_server" in fh.read()  # not a reused PID
        os.kill(pid, signal.SIGKILL)
        job.wait(timeout=60)
        assert job.code == 1, job.stdout + job.stderr
        cause = job.result()["cause"]
        assert (cause["kind"], cause["unit"], cause["signal"]) == (
            "critical_service_exit",
            "store-b",
            9,
        )
        assert events_of(job, "exited", step="prefill_0")
        assert events_of(job, "exited", step="service_mooncake-master")
    finally:
        if job.code is None:
            job.signal(signal.SIGKILL)
            job.wait(10)
        assert_no_survivors(job_dir)
