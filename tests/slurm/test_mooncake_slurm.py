"""srt-mooncake on the 3-node Slurm cluster: a dedicated Mooncake master on n1, a store on
each of the two worker nodes, and workers that put through one node's store and read back
through the other's, all by the nodes' own IPs (each node is a network namespace).

Skipped without srt-mooncake and Mooncake's binaries, unless SRT_REQUIRE_MOONCAKE=1 (tox's
suite environment, which installs `srt-mooncake[server]`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services.jobdir.events import read_events
from srt_services.testing.survivors import survivors

pytestmark = [pytest.mark.slurm, pytest.mark.component]

CLIENT = (
    Path(__file__).resolve().parents[2] / "plugins" / "mooncake" / "tests" / "mooncake_client.py"
)
VENV_BIN = Path(sys.executable).parent


def _require_mooncake() -> None:
    required = os.environ.get("SRT_REQUIRE_MOONCAKE") == "1"
    if not required:
        pytest.importorskip("srt_mooncake")
    for name in ("mooncake_master", "mc_store_rest_server"):
        if shutil.which(name) is None and not (VENV_BIN / name).is_file():
            if required:
                pytest.fail(f"{name} not found (pip install 'srt-mooncake[server]')")
            pytest.skip(f"needs Mooncake's {name} (pip install 'srt-mooncake[server]')")


def test_dedicated_master_with_stores_on_two_other_nodes(
    slurm_cluster_3: Any, slurm_env: Any, tmp_path: Path, wait_until: Any
) -> None:
    _require_mooncake()
    cluster = slurm_cluster_3
    shell = slurm_env(cluster)
    py = sys.executable
    a, b = "http://{prefill_ips}:8800", "http://{decode_ips}:8800"
    prefill = [py, str(CLIENT), "roundtrip", a, b, "k-prefill", "from-prefill", "8702"]
    decode = [py, str(CLIENT), "roundtrip", b, a, "k-decode", "from-decode", "8702"]
    check = [py, str(CLIENT), "check", f"{a},{b}", "k-prefill,k-decode", "8702", "2"]
    ready = "{log: {pattern: 'mooncake worker ready'}, timeout_seconds: 90}"
    sizes = "{global_segment_size: 64MB, local_buffer_size: 16MB}"
    recipe = tmp_path / "mooncake.yaml"
    recipe.write_text(
        textwrap.dedent(
            f"""
            schema: 2
            name: mooncake
            slurm: {{signal_before_end_seconds: 0}}
            resources: {{gpus_per_node: 1}}
            observability: {{metrics: false}}
            frontend: {{type: sglang, port: 9081, command: [python3, -m, http.server, "9081", --bind, "{{node_ip}}"]}}
            roles:
              prefill: {{command: {json.dumps(prefill)}, readiness: {ready}}}
              decode: {{command: {json.dumps(decode)}, readiness: {ready}}}
            benchmark: {{type: command, command: {json.dumps(check)}}}
            services:
              - {{name: mooncake-master, type: mooncake-master, placement: {{node: dedicated}}}}
              - {{name: store-prefill, type: mooncake-store, placement: {{node: prefill}}, options: {sizes}}}
              - {{name: store-decode, type: mooncake-store, placement: {{node: decode}}, options: {sizes}}}
            """
        )
    )
    job_dir = tmp_path / "job"
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "apply", str(recipe), "-o", str(job_dir), "--json"],
        capture_output=True,
        text=True,
        env=cluster.env(),
        check=False,
    )
    assert out.returncode == 0, out.stderr
    sub = json.loads(out.stdout)
    assert sub["nodes"] == 3, "two worker nodes plus the master's dedicated node"
    job_id = sub["job_id"]
    deadline = time.monotonic() + 180
    while shell.job_state(job_id) not in {"COMPLETED", "FAILED", "CANCELLED"}:
        assert time.monotonic() < deadline, (job_dir / "logs" / "sbatch.out").read_text()
        time.sleep(0.3)
    sbatch = (job_dir / "logs" / "sbatch.out").read_text()
    result = json.loads((job_dir / "result.json").read_text())
    assert result["exit_code"] == 0, sbatch

    events = read_events(str(job_dir / "events.jsonl"))
    node_of = {e["step"]: e["node"] for e in events if e["event"] == "launched"}
    assert node_of["service_mooncake-master"] == "n1"
    assert (node_of["service_store-prefill"], node_of["prefill_0"]) == ("n2", "n2")
    assert (node_of["service_store-decode"], node_of["decode_0"]) == ("n3", "n3")
    master_ip = cluster.node_ips["n1"]
    plan = json.loads((job_dir / "plan.json").read_text())
    assert plan["discovery_env"] == {
        "MOONCAKE_MASTER": f"{master_ip}:8700",
        "MOONCAKE_TE_META_DATA_SERVER": f"http://{master_ip}:8701/metadata",
        "MOONCAKE_PROTOCOL": "tcp",
    }
    logs = job_dir / "logs"
    for role, node, other in (("prefill", "n2", "n3"), ("decode", "n3", "n2")):
        ip = cluster.node_ips[node]
        worker = (logs / f"{role}_0.out").read_text()
        assert f"env MOONCAKE_MASTER={master_ip}:8700" in worker
        assert f"env MOONCAKE_LOCAL_HOSTNAME={ip}" in worker
        assert "env MOONCAKE_GLOBAL_SEGMENT_SIZE=0" in worker
        assert f"got 'from-{role}' via http://{cluster.node_ips[other]}:8800" in worker
        store = (logs / f"service_store-{role}.out").read_text()
        # registered with the node's own address, not an interface the engine picked
        assert f"Store service started successfully on {ip}" in store
        assert f"listening on {ip}:" in store
    bench = (logs / "benchmark.out").read_text()
    assert "master counts 2 key(s)" in bench, bench
    wait_until(lambda: not shell.job_pids(job_id), timeout=30, what="job processes gone")
    assert not survivors(str(job_dir))
