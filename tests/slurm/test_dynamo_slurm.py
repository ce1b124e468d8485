"""srt-dynamo on the 3-node Slurm cluster (``srt apply``): a disaggregated mocker job, etcd
and NATS on n1, the prefill worker and the frontend on n2, the decode worker on n3, each
node a network namespace with its own address, over the NATS request plane; its benchmark
sends concurrent chat completions through the frontend.

Needs Dynamo next to srt (the ``dynamo`` tox environment; the cluster's nodes share this
machine's filesystem, so the same interpreter runs there): skipped without it, an error
with ``SRT_REQUIRE_DYNAMO=1``. The ``submit`` fixture proves nothing of the job survived.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing import needs

pytestmark = [pytest.mark.slurm, pytest.mark.component, pytest.mark.slow]

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "dynamo_chat_client.py"


@pytest.fixture(autouse=True)
def _dynamo() -> None:
    if importlib.util.find_spec("srt_dynamo") is None or importlib.util.find_spec("dynamo") is None:
        needs.missing("needs srt-dynamo and Dynamo (tox -e dynamo)", "SRT_REQUIRE_DYNAMO")


def test_a_disaggregated_mocker_job_serves_across_three_nodes(
    slurm_cluster_3: Any, submit: Any, tmp_path: Path
) -> None:
    from srt_dynamo.tiny_model import build

    model = tmp_path / "tiny"
    build(str(model), "tiny")
    bench = ["{python}", str(CLIENT), "tiny", "20"]
    offline = {"HF_HUB_OFFLINE": "1"}
    recipe = {
        "schema": 2,
        "name": "dynslurm",
        "slurm": {"signal_before_end_seconds": 0},
        "observability": {"metrics": False},
        "resources": {"gpus_per_node": 1},
        "engine": {
            "type": "mocker",
            "model": str(model),
            "options": {"mocker": {"speedup_ratio": 10}, "readiness_timeout_seconds": 180},
        },
        "dynamo": {"request_plane": "nats"},
        "frontend": {"type": "dynamo", "env": offline},
        "roles": {"prefill": {"env": offline}, "decode": {"env": offline}},
        "benchmark": {"type": "command", "command": bench, "timeout_seconds": 120},
        "services": [
            {"name": "etcd", "type": "etcd", "placement": {"node": "dedicated"}},
            {"name": "nats", "type": "nats", "placement": {"node": "dedicated"}},
        ],
    }
    job = submit(json.dumps(recipe), "dynslurm")
    assert job.wait_done(300) == "COMPLETED", job.sbatch_log()
    result = job.result()
    assert result["exit_code"] == 0, (result, job.sbatch_log())
    ips = slurm_cluster_3.node_ips
    launched = {e["step"]: e["node"] for e in job.events("launched")}
    assert (launched["prefill_0"], launched["decode_0"], launched["frontend"]) == ("n2", "n3", "n2")
    assert (launched["service_etcd"], launched["service_nats"]) == ("n1", "n1")
    assert "chats ok 20/20" in job.log("benchmark")
    plan = job.plan()
    decode = next(u for u in plan["units"] if u["name"] == "decode")["instances"][0]
    # the worker advertises its own node's address and finds etcd and NATS on n1's
    assert decode["env"]["DYN_TCP_RPC_HOST"] == ips["n3"]
    assert decode["env"]["ETCD_ENDPOINTS"] == f"http://{ips['n1']}:2379"
    assert decode["env"]["NATS_SERVER"] == f"nats://{ips['n1']}:4222"
    assert decode["env"]["DYN_REQUEST_PLANE"] == "nats"
