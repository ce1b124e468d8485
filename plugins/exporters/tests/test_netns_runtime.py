"""The real exporters on two separate local nodes at their default ports.

With a network namespace per virtual node (``srt run --local-network namespaces``) each
node is a network of its own, so the implied node and process exporters keep the ports
their kinds default to (9101, 9256) on both nodes and the implied Prometheus its 9099,
as on two machines, instead of the free ports a shared-network run moves them to. The job
is reached from the host over its bridge; traffic crosses only the namespaces it makes.
The fixture's check proves no process, namespace or bridge of the job is left.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from srt_services.extend import Plan
from srt_services.testing import netns
from srt_services.testing.jobs import Jobs, wait_for

BINARIES = ("prometheus", "prometheus-node-exporter", "prometheus-process-exporter")
REASON = netns.unavailable()
pytestmark = [
    pytest.mark.component,
    pytest.mark.skipif(
        any(shutil.which(b) is None for b in BINARIES),
        reason="needs prometheus, prometheus-node-exporter, prometheus-process-exporter (Debian)",
    ),
    pytest.mark.skipif(REASON is not None, reason=f"network namespaces: {REASON}"),
]


def recipe(frontend: int) -> str:
    server = [sys.executable, "-m", "http.server", str(frontend), "--bind", "{node_ip}"]
    return (
        "schema: 2\n"
        "name: netns-metrics\n"
        "resources: {gpus_per_node: 1}\n"
        f"frontend: {{type: sglang, port: {frontend}, command: {json.dumps(server)}}}\n"
        "roles:\n"
        '  prefill: {command: [sleep, "600"]}\n'
        '  decode: {command: [sleep, "600"]}\n'
        "services:\n"
        "  - {name: dcgm-exporter, type: dcgm-exporter, options: {if_missing: skip}}\n"
    )


def test_the_planned_exporters_keep_their_default_ports_on_separate_nodes(
    srt_plan: Callable[..., Plan],
) -> None:
    plan = srt_plan(recipe(18100), runs_here=True, local_network="namespaces")
    assert plan.local_network is not None and plan.local_network.mode == "namespaces"
    ports = {
        (u.name, i.node): i.ports
        for u in plan.units
        for i in u.instances
        if u.name in ("node-exporter", "process-exporter", "prometheus")
    }
    assert ports[("node-exporter", "node0")] == ports[("node-exporter", "node1")] == [9101]
    assert ports[("process-exporter", "node0")] == ports[("process-exporter", "node1")] == [9256]
    assert ports[("prometheus", "node0")] == [9099]
    # shared: the same job on this machine's one network moves them to free ports
    shared = srt_plan(recipe(18100), runs_here=True, local_network="shared")
    moved = [i.ports for u in shared.units if u.name == "node-exporter" for i in u.instances]
    assert moved[0] != [9101] and moved[0] == moved[1]


def _targets(prometheus: str) -> list[dict[str, Any]]:
    try:
        got = httpx.get(f"{prometheus}/api/v1/targets", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return []
    active: list[dict[str, Any]] = got["data"]["activeTargets"]
    return active


def test_two_nodes_run_the_exporters_and_prometheus_at_their_defaults(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    job = srt_jobs.start(recipe(srt_free_port()), "--local-network", "namespaces")
    job.wait_event("serving", timeout=120)
    net = netns.network_of(job.job_dir)
    assert net is not None and net.mode == "namespaces"
    a, b = net.addresses["node0"], net.addresses["node1"]
    # the exporters have no readiness probe (the kinds' default): "serving" does not wait
    # for them to listen, so each is asked until it answers
    for address in (a, b):
        for port, metric in ((9101, "node_cpu_seconds_total"), (9256, "namedprocess_")):
            url = f"http://{address}:{port}/metrics"
            wait_for(lambda url=url: _answers(url), timeout=60, step=0.2)
            assert metric in httpx.get(url, timeout=10).text, (address, port)
    # the job's Prometheus (node0, 9099) scrapes both nodes' exporters over the bridge
    prometheus = f"http://{a}:9099"

    wanted = {f"http://{address}:{port}/metrics" for address in (a, b) for port in (9101, 9256)}

    def all_up() -> bool:
        up = {t["scrapeUrl"] for t in _targets(prometheus) if t["health"] == "up"}
        return wanted <= up

    wait_for(all_up, timeout=60, step=0.5)
    states = {s: i["state"] for s, i in job.state()["instances"].items()}
    # no GPU here: dcgm-exporter is unavailable on both nodes, which does not fail the job
    dcgm = {s: v for s, v in states.items() if "dcgm" in s}
    assert set(dcgm.values()) == {"unavailable"} and len(dcgm) == 2, states
    assert not [s for s, v in states.items() if v not in ("ready", "unavailable")], states
    job.stop()
    job.wait(60)
    assert netns.leftovers(net) == []


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
