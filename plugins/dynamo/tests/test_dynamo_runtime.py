"""The real Dynamo 1.6 under ``srt run``: its frontend and mocker workers, with the etcd and
NATS srt starts, on virtual nodes (127.0.0.x).

Needs Dynamo installed next to srt (the ``dynamo`` tox environment installs it; elsewhere
these skip, and fail under ``SRT_REQUIRE_DYNAMO=1``), etcd and nats-server. Each job runs
with a fresh, empty ``HOME`` and ``TMPDIR`` and must leave both empty: Dynamo writes a temp
file on every start and caches model cards under ``~/.cache/dynamo`` unless the engine keeps
them in the job's node-local directory. Every test ends with the no-survivors check of the
``srt_jobs`` fixture.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from dynamo_stack import chat_load, free_block, nats_counters, require_dynamo, wait_listed
from srt_services.testing.jobs import Jobs, run_srt

pytestmark = [pytest.mark.component, pytest.mark.slow]

MODEL = "tiny"
#: requests per burst; each completes in well under a second at speedup 10
BURST = 24


@pytest.fixture(autouse=True)
def _dynamo() -> None:
    require_dynamo()


@pytest.fixture
def private(tmp_path: Path) -> dict[str, str]:
    """HOME and TMPDIR of ``srt run``: empty, and checked empty at the end."""
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    tmp.mkdir()
    return {"HOME": str(home), "TMPDIR": str(tmp), "HF_HUB_OFFLINE": "1"}


def left_in(env: dict[str, str]) -> list[str]:
    return sorted(str(p) for key in ("HOME", "TMPDIR") for p in Path(env[key]).rglob("*"))


def recipe(name: str, body: dict[str, Any]) -> str:
    doc = {"schema": 2, "name": name, "observability": {"metrics": False}, **body}
    return json.dumps(doc, indent=1)


def services(etcd: int, nats: int, dedicated: bool = False) -> list[dict[str, Any]]:
    """etcd and NATS on free ports (NATS's monitor port too: its counters are the proof)."""
    place = {"placement": {"node": "dedicated"}} if dedicated else {}
    return [
        {
            "name": "etcd",
            "type": "etcd",
            "options": {"client_port": etcd, "peer_port": etcd + 1},
            **place,
        },
        {
            "name": "nats",
            "type": "nats",
            "options": {"port": nats, "monitor_port": nats + 1},
            **place,
        },
    ]


def test_aggregated_serves_concurrent_chats_on_the_tcp_plane_and_srt_stop_ends_it(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str]
) -> None:
    base = free_block(8)
    front, etcd, nats, system = base, base + 2, base + 4, base + 6
    text = recipe(
        "dynagg",
        {
            "resources": {"gpus_per_node": 1},
            "engine": {
                "type": "mocker",
                "model": str(tiny_model),
                "options": {"mocker": {"speedup_ratio": 10}, "ports": {"system": system}},
            },
            "frontend": {"type": "dynamo", "port": front},
            "dynamo": {"request_plane": "tcp", "event_plane": "zmq"},
            "roles": {"agg": {"workers": 1}},
            # NATS runs (declared) and every process is told NATS_SERVER: on the TCP
            # request plane with ZMQ events it must carry nothing
            "services": services(etcd, nats),
        },
    )
    run = srt_jobs.start(text, env=private)
    run.wait_event("serving", timeout=120)
    url = f"http://127.0.0.1:{front}"
    chat_load(url, MODEL, BURST)
    counters = nats_counters(nats + 1)
    assert counters == {"in_msgs": 0, "out_msgs": 0, "connections": 0}, counters
    plan = json.loads(Path(run.job_dir, "plan.json").read_text())
    worker = next(u for u in plan["units"] if u["name"] == "agg")["instances"][0]
    assert worker["env"]["DYN_REQUEST_PLANE"] == "tcp"
    assert worker["env"]["NATS_SERVER"] == f"nats://127.0.0.1:{nats}"
    stopped = run_srt("stop", run.job_dir, env=private, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    run.wait(120)
    assert run.code == 0, run.stderr
    assert left_in(private) == []
    assert not Path(plan["local_dir"]).exists()


def test_disaggregated_on_two_nodes_over_nats_survives_a_worker_restart_and_ctrl_c(
    srt_jobs: Jobs, tiny_model: Path, private: dict[str, str]
) -> None:
    base = free_block(8)
    front, etcd, nats, system = base, base + 2, base + 4, base + 6
    text = recipe(
        "dyndisagg",
        {
            "resources": {"gpus_per_node": 1},
            "engine": {
                "type": "mocker",
                "model": str(tiny_model),
                "options": {
                    "mocker": {"speedup_ratio": 10},
                    "ports": {"system": system, "bootstrap": free_block(1)},
                },
            },
            # a hand-written frontend: the engine still gives it the port (DYN_HTTP_PORT)
            # and the planes; it advertises its node's address itself
            "frontend": {
                "type": "dynamo",
                "port": front,
                "command": ["{python}", "-m", "dynamo.frontend", "--http-host", "{node_ip}"],
                "env": {
                    "DYN_TCP_RESPONSE_STREAM_HOST": "{node_ip}",
                    "HOME": "{local_dir}",
                    "TMPDIR": "{local_dir}",
                },
                "readiness": {
                    "http": {"path": "/v1/models", "body": {"json": "data[].id", "equals": MODEL}},
                    "timeout_seconds": 120,
                },
            },
            "dynamo": {"request_plane": "nats"},
            "roles": {"prefill": {"workers": 1}, "decode": {"workers": 1}},
            # etcd and NATS on a node of their own: the workers on 127.0.0.2 and .3
            "services": services(etcd, nats, dedicated=True),
        },
    )
    run = srt_jobs.start(text, env=private)
    run.wait_event("serving", timeout=120)
    launched = {e["step"]: e["node"] for e in run.events() if e["event"] == "launched"}
    plan = json.loads(Path(run.job_dir, "plan.json").read_text())
    ips = {i["step"]: i["node_ip"] for u in plan["units"] for i in u["instances"]}
    assert (ips["prefill_0"], ips["decode_0"]) == ("127.0.0.2", "127.0.0.3"), launched
    url = f"http://{ips['frontend']}:{front}"
    before = nats_counters(nats + 1)
    chat_load(url, MODEL, BURST)
    after = nats_counters(nats + 1)
    # each request crosses the NATS request plane (a request and its reply at least)
    assert after["in_msgs"] - before["in_msgs"] >= 2 * BURST, (before, after)
    assert after["connections"] >= 3, after  # frontend, prefill, decode

    restarted = run_srt("restart", run.job_dir, "decode", "--force", env=private, timeout=120)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    assert [e["step"] for e in run.events() if e["event"] == "launched"].count("decode_0") == 2
    wait_listed(url, MODEL)
    chat_load(url, MODEL, BURST)

    run.signal(signal.SIGINT)  # Ctrl-C
    run.wait(120)
    assert run.code is not None
    assert left_in(private) == []
    assert not Path(plan["local_dir"]).exists()
    assert os.path.isdir(run.job_dir)
