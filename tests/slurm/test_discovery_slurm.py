"""srt-etcd and srt-nats on the 3-node Slurm cluster: the discovery plane on a dedicated node,
workers on the others reaching it by IP (issue 5's Slurm variant)."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.component]

WORKER = r"""
import base64, json, os, socket, urllib.request
b64 = lambda s: base64.b64encode(s.encode()).decode()
me = "agg_" + os.environ["WORKER"] + "@" + os.environ["SRT_NODE_IP"]
body = json.dumps({"key": b64("workers/" + os.environ["WORKER"]), "value": b64(me)}).encode()
urllib.request.urlopen(urllib.request.Request(os.environ["ETCD_ENDPOINTS"] + "/v3/kv/put", body), timeout=5)
host, port = os.environ["NATS_SERVER"].split("//")[1].rsplit(":", 1)
nats = socket.create_connection((host, int(port)))
rx = nats.makefile("rb")
rx.readline()
nats.sendall(b'CONNECT {"verbose":false}\r\nSUB srt.ping.' + os.environ["WORKER"].encode() + b' 1\r\nPING\r\n')
while rx.readline() != b"PONG\r\n":
    pass
print("registered " + me, flush=True)
while True:
    words = rx.readline().split()
    if not words:
        break
    if words[0] == b"PING":
        nats.sendall(b"PONG\r\n")
    elif words[0] == b"MSG":
        data = rx.read(int(words[-1]) + 2)[:-2]
        reply = b"pong from " + me.encode()
        nats.sendall(b"PUB " + words[3] + b" %d\r\n" % len(reply) + reply + b"\r\n")
"""

CHECK = r"""
import base64, json, os, socket, sys, urllib.request
b64 = lambda s: base64.b64encode(s.encode()).decode()
out = []
for w in ("0", "1"):
    body = json.dumps({"key": b64("workers/" + w)}).encode()
    kvs = json.load(urllib.request.urlopen(urllib.request.Request(os.environ["ETCD_ENDPOINTS"] + "/v3/kv/range", body), timeout=5))
    worker = base64.b64decode(kvs["kvs"][0]["value"]).decode()
    host, port = os.environ["NATS_SERVER"].split("//")[1].rsplit(":", 1)
    nats = socket.create_connection((host, int(port)), timeout=5)
    rx = nats.makefile("rb")
    rx.readline()
    nats.sendall(b'CONNECT {"verbose":false}\r\nSUB inbox 1\r\nPUB srt.ping.' + w.encode() + b' inbox 4\r\nping\r\n')
    words = rx.readline().split()
    while words[0] != b"MSG":
        words = rx.readline().split()
    reply = rx.read(int(words[-1]) + 2)[:-2].decode()
    out.append((worker, reply))
    print("etcd:", worker, "nats:", reply, flush=True)
sys.exit(0 if all(r == "pong from " + w for w, r in out) else 1)
"""

needs_servers = pytest.mark.skipif(
    shutil.which("etcd") is None or shutil.which("nats-server") is None,
    reason="needs etcd and nats-server (apt-get install etcd-server nats-server)",
)


@needs_servers
def test_dedicated_discovery_plane_reached_by_ip_from_other_nodes(
    slurm_cluster_3: Any, submit: Any
) -> None:
    cluster = slurm_cluster_3
    job = submit(
        f"""
        schema: 2
        name: plane
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        resources: {{gpus_per_node: 1}}
        frontend: {{type: dynamo, port: 9081, command: [python3, -m, http.server, "9081", --bind, "{{node_ip}}"]}}
        dynamo: {{request_plane: nats}}
        roles:
          agg:
            workers: 2
            command: [python3, -c, {json.dumps(WORKER)}]
            env: {{WORKER: "{{worker_index}}"}}
            readiness: {{log: {{pattern: registered}}, timeout_seconds: 60}}
        benchmark: {{type: command, command: [python3, -c, {json.dumps(CHECK)}]}}
        services:
          - {{name: etcd, type: etcd, placement: {{node: dedicated}}}}
          - {{name: nats, type: nats, placement: {{node: dedicated}}}}
        """,
        "dedicated",
    )
    assert job.applied["nodes"] == 3, "two worker nodes plus one dedicated infra node"
    job.wait_done(120)
    assert job.result()["exit_code"] == 0, job.sbatch_log()
    node_of = {e["step"]: e["node"] for e in job.events("launched")}
    assert node_of["service_etcd"] == node_of["service_nats"] == "n1"
    assert {node_of["agg_0"], node_of["agg_1"]} == {"n2", "n3"}
    infra_ip = cluster.node_ips["n1"]
    assert job.plan()["discovery_env"] == {
        "ETCD_ENDPOINTS": f"http://{infra_ip}:2379",
        "NATS_SERVER": f"nats://{infra_ip}:4222",
    }
    bench = job.log("benchmark")
    for node in ("n2", "n3"):
        assert "pong from agg_" in bench and cluster.node_ips[node] in bench
    job.assert_nothing_left()
    assert os.path.exists(job.job_dir / "state.json")
