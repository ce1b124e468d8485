"""The ``ray-fleet`` probe: how it reads the head's node list and what it says when the
cluster is short. The HTTP side runs against a real local server that answers the way
Ray's dashboard does (and the ways it can fail); the runtime tests run it against Ray.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from srt_ray.fleet import NODES_PATH, RayFleetProbe, get_json, judge, log_shows, node_list

MEMBERS = [
    {"node": "n1", "ip": "10.251.0.11"},
    {"node": "n2", "ip": "10.251.0.12"},
    {"node": "n3", "ip": "10.251.0.13"},
]


def ray_node(ip: str, state: str = "ALIVE", message: str | None = None) -> dict[str, Any]:
    """A record shaped like one of Ray 2.60's ``/api/v0/nodes`` entries."""
    return {
        "node_id": f"id-{ip}-{state}",
        "node_ip": ip,
        "is_head_node": ip.endswith(".11"),
        "state": state,
        "state_message": message,
        "node_name": ip,
        "resources_total": {"CPU": 1.0},
        "labels": {},
    }


def answer(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "result": True,
        "msg": "",
        "data": {
            "result": {
                "total": len(nodes),
                "num_after_truncation": len(nodes),
                "num_filtered": len(nodes),
                "result": nodes,
                "partial_failure_warning": "",
                "warnings": None,
            }
        },
    }


# --------------------------------------------------------------------------- judging


def test_every_member_alive_is_ready() -> None:
    result = judge(MEMBERS, [ray_node(m["ip"]) for m in MEMBERS])
    assert result.ok
    assert result.detail == "3/3 Ray nodes ALIVE"


def test_a_missing_member_is_named_with_its_address() -> None:
    result = judge(MEMBERS, [ray_node("10.251.0.11"), ray_node("10.251.0.12")])
    assert not result.ok
    assert result.detail == "2/3 Ray nodes ALIVE; missing: n3 (10.251.0.13)"


def test_a_member_that_left_says_why_ray_marked_it_dead() -> None:
    nodes = [
        ray_node("10.251.0.11"),
        ray_node("10.251.0.12", "DEAD", "Terminated due to preemption: Node received SIGTERM"),
        ray_node("10.251.0.13"),
    ]
    result = judge(MEMBERS, nodes)
    assert not result.ok
    assert result.detail == (
        "2/3 Ray nodes ALIVE; missing: n2 (10.251.0.12) DEAD: Terminated due to preemption:"
        " Node received SIGTERM"
    )


def test_a_restarted_member_counts_once_it_is_alive_again() -> None:
    nodes = [ray_node(m["ip"]) for m in MEMBERS] + [ray_node("10.251.0.12", "DEAD")]
    assert judge(MEMBERS, nodes).ok


def test_nodes_at_addresses_srt_did_not_plan_count_but_are_pointed_out() -> None:
    # srt run: Ray replaced each loopback address by the machine's own
    local = [{"node": "node0", "ip": "127.0.0.1"}, {"node": "node1", "ip": "127.0.0.2"}]
    assert judge(local, [ray_node("192.0.2.2"), ray_node("192.0.2.2")]).ok
    result = judge(local, [ray_node("192.0.2.2")])
    assert not result.ok
    assert result.detail == (
        "1/2 Ray nodes ALIVE; missing: 1 of node0 (127.0.0.1), node1 (127.0.0.2); ALIVE at"
        " 192.0.2.2, which srt did not plan (Ray replaces a loopback --node-ip-address by the"
        " machine's own address)"
    )


def test_a_long_list_of_missing_members_is_cut() -> None:
    many = [{"node": f"n{i}", "ip": f"10.0.{i // 250}.{i % 250}"} for i in range(100)]
    result = judge(many, [])
    assert result.detail.startswith("0/100 Ray nodes ALIVE; missing: n0 (10.0.0.0), ")
    assert result.detail.endswith(" and 80 more")


def test_only_the_node_list_shape_is_accepted() -> None:
    assert node_list(answer([ray_node("10.0.0.1")])) == [ray_node("10.0.0.1")]
    for bad in ({}, {"data": None}, {"data": {"result": {"result": "x"}}}, [1], None):
        assert node_list(bad) is None


# --------------------------------------------------------------------------- over HTTP


class Dashboard(BaseHTTPRequestHandler):
    """Answers like Ray's dashboard, or the way the test asks it to fail."""

    reply: tuple[int, bytes] = (200, b"{}")
    paths: list[str] = []

    def do_GET(self) -> None:
        Dashboard.paths.append(self.path)
        status, body = self.reply
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[tuple[str, int]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Dashboard.paths = []
    try:
        yield "127.0.0.1", int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


class Target:
    """The least of a ProbeTarget the fleet probe reads."""

    def __init__(self, config: dict[str, Any], log_path: str = "", log_offset: int = 0) -> None:
        self.config = config
        self.last_error = ""
        self.log_path = log_path
        self.log_offset = log_offset


def check(
    host: str, port: int, members: list[dict[str, str]], started: str | None = None, **log: Any
) -> tuple[bool, str]:
    probe = RayFleetProbe()
    config = {
        "host": host,
        "port": port,
        "url": f"http://{host}:{port}{NODES_PATH}",
        "members": members,
        "started": started,
    }
    result = asyncio.run(probe.check(Target(config, **log), 2.0))  # type: ignore[arg-type]
    return result.ok, result.detail


def test_the_heads_own_start_line_is_waited_for_in_this_attempts_part_of_its_log(
    dashboard: tuple[str, int], tmp_path: Path
) -> None:
    host, port = dashboard
    Dashboard.reply = (200, json.dumps(answer([ray_node("10.251.0.11")])).encode())
    log = tmp_path / "service_train_n1.out"
    log.write_bytes(b"\x1b[32mRay runtime started.\x1b[39m\n")  # an earlier attempt's
    offset = log.stat().st_size
    with log.open("ab") as fh:
        fh.write(b"Local node IP: 10.251.0.11\n")
    pattern = r"Ray\ runtime\ started"
    ok, detail = check(host, port, MEMBERS[:1], pattern, log_path=str(log), log_offset=offset)
    assert not ok and detail == f"no line matching /{pattern}/ in {log} yet"
    assert Dashboard.paths == [], "the node list is asked only once the head has started"
    with log.open("ab") as fh:
        fh.write(
            b"2026-12-01 13:42:23,781\tSUCC scripts.py:1085 -- \x1b[32mRay runtime started.\x1b[39m\n"
        )
    assert check(host, port, MEMBERS[:1], pattern, log_path=str(log), log_offset=offset)[0]
    assert not log_shows(str(tmp_path / "missing.out"), 0, pattern)


def test_the_probe_reads_the_node_list_over_http(dashboard: tuple[str, int]) -> None:
    host, port = dashboard
    Dashboard.reply = (200, json.dumps(answer([ray_node("10.251.0.11")])).encode())
    assert check(host, port, MEMBERS[:1]) == (True, "1/1 Ray nodes ALIVE")
    assert Dashboard.paths == [NODES_PATH]
    ok, detail = check(host, port, MEMBERS[:2])
    assert not ok and detail == "1/2 Ray nodes ALIVE; missing: n2 (10.251.0.12)"


@pytest.mark.parametrize(
    ("reply", "why"),
    [
        ((500, b'{"result": false}'), "HTTP 500"),
        ((200, b"<html>hello</html>"), "not JSON: '<html>hello</html>'"),
        ((200, b'{"data": {}}'), "answered without a node list"),
    ],
)
def test_a_dashboard_that_answers_wrongly_is_not_ready(
    dashboard: tuple[str, int], reply: tuple[int, bytes], why: str
) -> None:
    host, port = dashboard
    Dashboard.reply = reply
    ok, detail = check(host, port, MEMBERS)
    assert not ok
    assert why in detail
    assert f"http://{host}:{port}{NODES_PATH}" in detail


def test_a_closed_port_and_a_silent_one_are_not_ready() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ok, detail = check("127.0.0.1", port, MEMBERS)
    assert not ok and detail.endswith(": ECONNREFUSED")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        doc, why = asyncio.run(get_json("127.0.0.1", silent.getsockname()[1], "/", 0.3))
    assert doc is None and why == "no answer within 0.3s"
