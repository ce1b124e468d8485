"""srt-mooncake on the 3-node Slurm cluster: a dedicated Mooncake master on n1, a store on
each of the two worker nodes, and workers that put through one node's store and read back
through the other's, all by the nodes' own IPs (each node is a network namespace).

Skipped without srt-mooncake and Mooncake's binaries, unless SRT_REQUIRE_MOONCAKE=1 (tox's
suite environment, which installs `srt-mooncake[server]`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing import needs

pytestmark = [pytest.mark.slurm, pytest.mark.component]

CLIENT = (
    Path(__file__).resolve().parents[2] / "plugins" / "mooncake" / "tests" / "mooncake_client.py"
)


def _require_mooncake() -> None:
    if os.environ.get("SRT_REQUIRE_MOONCAKE") != "1":
        pytest.importorskip("srt_mooncake")
    for name in ("mooncake_master", "mc_store_rest_server"):
        if needs.venv_script(name) is None:
            needs.missing(
                f"needs Mooncake's {name} (pip install 'srt-mooncake[server]')",
                "SRT_REQUIRE_MOONCAKE",
            )


def test_dedicated_master_with_stores_on_two_other_nodes(slurm_cluster_3: Any, submit: Any) -> None:
    _require_mooncake()
    cluster = slurm_cluster_3
    py = sys.executable
    a, b = "http://{prefill_ips}:8800", "http://{decode_ips}:8800"
    prefill = [py, str(CLIENT), "roundtrip", a, b, "k-prefill", "from-prefill", "8702"]
    decode = [py, str(CLIENT), "roundtrip", b, a, "k-decode", "from-decode", "8702"]
    check = [py, str(CLIENT), "check", f"{a},{b}", "k-prefill,k-decode", "8702", "2"]
    ready = "{log: {pattern: 'mooncake worker ready'}, timeout_seconds: 90}"
    sizes = "{global_segment_size: 64MB, local_buffer_size: 16MB}"
    job = submit(
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
        """,
        "mooncake",
    )
    assert job.applied["nodes"] == 3, "two worker nodes plus the master's dedicated node"
    job.wait_done(180)
    assert job.result()["exit_code"] == 0, job.sbatch_log()

    node_of = {e["step"]: e["node"] for e in job.events("launched")}
    assert node_of["service_mooncake-master"] == "n1"
    assert (node_of["service_store-prefill"], node_of["prefill_0"]) == ("n2", "n2")
    assert (node_of["service_store-decode"], node_of["decode_0"]) == ("n3", "n3")
    master_ip = cluster.node_ips["n1"]
    assert job.plan()["discovery_env"] == {
        "MOONCAKE_MASTER": f"{master_ip}:8700",
        "MOONCAKE_TE_META_DATA_SERVER": f"http://{master_ip}:8701/metadata",
        "MOONCAKE_PROTOCOL": "tcp",
    }
    for role, node, other in (("prefill", "n2", "n3"), ("decode", "n3", "n2")):
        ip = cluster.node_ips[node]
        worker = job.log(f"{role}_0")
        assert f"env MOONCAKE_MASTER={master_ip}:8700" in worker
        assert f"env MOONCAKE_LOCAL_HOSTNAME={ip}" in worker
        assert "env MOONCAKE_GLOBAL_SEGMENT_SIZE=0" in worker
        assert f"got 'from-{role}' via http://{cluster.node_ips[other]}:8800" in worker
        store = job.log(f"service_store-{role}")
        # registered with the node's own address, not an interface the engine picked
        assert f"Store service started successfully on {ip}" in store
        assert f"listening on {ip}:" in store
    bench = job.log("benchmark")
    assert "master counts 2 key(s)" in bench, bench
    job.assert_nothing_left()
