"""The node agent judges memory by the host's real numbers (MemAvailable, PSI), with the
configured budget as an upper bound: it refuses what the host cannot hold and yields idle
services while the host is short, giving the memory back when the host has room again.

The agent runs in-process over the fake module's real executables; the host's reading
comes through the gauge seam (:class:`HostLimits`), which the test controls, except in the
one test that reads this host's real values.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from node_agent_kit import BundleFactory
from oarbank_protocol.agent.node.agent import NodeAgent, NodeAgentConfig
from oarbank_protocol.errors import MemoryExhausted
from oarbank_protocol.lifecycle.host_memory import (
    GB,
    PSI_MEMORY,
    HostLimits,
    HostMemory,
    read_host_memory,
    read_psi_some_avg10,
)
from oarbank_protocol.lifecycle.options import SupervisorOptions
from oarbank_testkit import FakeBundle, ProcessTracker, async_wait_until, run, service_entry

pytestmark = pytest.mark.timeout(120)


class Gauge:
    """The host as the test says it is."""

    def __init__(self, available_gb: float, psi: float | None = 0.0) -> None:
        self.reading = HostMemory(available_gb, psi)

    def set(self, available_gb: float, psi: float | None = 0.0) -> None:
        self.reading = HostMemory(available_gb, psi)

    def __call__(self) -> HostMemory:
        return self.reading


def cache_bundle(factory: BundleFactory) -> FakeBundle:
    entry = service_entry("cache", lifecycle="always", yieldable=True, reserves_host_memory=True)
    return factory(module="java", services=[entry], config={"reserve_mem_gb": 4})


def agent_for(
    tmp: Path, procs: ProcessTracker, fake: FakeBundle, gauge: Gauge, **config: Any
) -> NodeAgent:
    data = tmp / "node-data"
    procs.watch(data)
    return NodeAgent(
        NodeAgentConfig(
            bundles=[fake.root],
            node_id="node-1",
            data_root=data,
            state_dir=tmp / "state",
            host_memory=HostLimits(gauge=gauge, min_free_gb=1.0, psi_limit=10.0),
            pressure_period_s=0.1,
            options=SupervisorOptions(reap_period_s=3600),
            **config,
        )
    )


def cache_state(agent: NodeAgent) -> str:
    return str(agent.managers["java"].services["cache"].state)


def test_refuses_what_the_host_cannot_hold_with_the_budget_as_upper_bound(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    gauge = Gauge(available_gb=4.0)
    agent = agent_for(tmp_path, procs, cache_bundle(bundle_factory), gauge, mem_budget_gb=10)

    async def main() -> None:
        await agent.recover()
        agent.start_loops()
        try:
            # 4 GB available, 1 kept free: 3 GB may be charged although the budget has 10.
            assert agent.resources.mem_free_gb() == 3.0
            with pytest.raises(MemoryExhausted, match=r"host memory short: need 3\.5 GB") as exc:
                await agent.admit({"attempt_id": "big", "mem_gb": 3.5})
            assert "3 GB available on the host" in str(exc.value)
            await agent.admit({"attempt_id": "fits", "mem_gb": 2.5})
            agent.release("fits")
            # The budget stays an upper bound when the host has plenty.
            gauge.set(available_gb=100.0)
            with pytest.raises(MemoryExhausted, match="budget exceeded: need 11 GB"):
                await agent.admit({"attempt_id": "huge", "mem_gb": 11})
            # Tasks stalling on memory: nothing new is charged, whatever is available.
            gauge.set(available_gb=100.0, psi=35.0)
            with pytest.raises(MemoryExhausted, match=r"PSI some avg10 35% > 10%"):
                await agent.admit({"attempt_id": "stalled", "mem_gb": 0.5})
            assert agent.status()["memory"]["host"]["under_pressure"] is True
        finally:
            assert await agent.shutdown()

    run(main())


def test_yields_while_the_host_is_short_and_resumes_when_it_has_room(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    gauge = Gauge(available_gb=16.0)
    fake = cache_bundle(bundle_factory)
    agent = agent_for(tmp_path, procs, fake, gauge)  # no budget at all: the host alone

    async def main() -> None:
        await agent.recover()
        agent.start_loops()
        cache = agent.managers["java"].services["cache"]
        try:
            assert await async_wait_until(lambda: cache_state(agent) == "ready", 20)
            gauge.set(available_gb=0.5)  # something else on the host took the memory
            assert await async_wait_until(lambda: cache_state(agent) == "stopped", 20)
            assert "yielded under memory pressure" in cache.reason
            assert agent.resources.mem_charged_gb == 0
            gauge.set(available_gb=3.0)  # room, but not the cache's 4 GB above 1 kept free
            assert not await async_wait_until(lambda: cache_state(agent) != "stopped", 1.0)
            gauge.set(available_gb=6.0)
            assert await async_wait_until(lambda: cache_state(agent) == "ready", 20)
            assert agent.resources.mem_charged_gb == 4
            assert agent.managers["java"].events.kinds("cache").count("started") == 2
            gauge.set(available_gb=16.0, psi=60.0)  # plenty free, but tasks stall
            assert await async_wait_until(lambda: cache_state(agent) == "stopped", 20)
        finally:
            assert await agent.shutdown()

    run(main())


def test_reads_this_hosts_real_memory(tmp_path: Path) -> None:
    reading = read_host_memory()
    total_gb = psutil.virtual_memory().total / GB
    assert 0 < reading.available_gb <= total_gb
    if PSI_MEMORY.exists():
        assert reading.psi_some_avg10 is not None and 0 <= reading.psi_some_avg10 <= 100
    else:
        assert reading.psi_some_avg10 is None
    # The real gauge is the default, and the agent's status shows what it read.
    limits = HostLimits()
    assert limits.gauge is read_host_memory
    assert limits.free_gb(reading) <= reading.available_gb


def test_psi_file_parsing(tmp_path: Path) -> None:
    psi = tmp_path / "memory"
    psi.write_text(
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\n"
        "full avg10=2.00 avg60=0.00 avg300=0.00 total=4\n"
    )
    assert read_psi_some_avg10(psi) == 12.5
    psi.write_text("garbage\n")
    assert read_psi_some_avg10(psi) is None
    assert read_psi_some_avg10(tmp_path / "absent") is None


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary() | st.text().map(str.encode))
def test_psi_parsing_never_raises(tmp_path: Path, data: bytes) -> None:
    """Whatever the file holds, a number of the "some" line or None, never an exception."""
    psi = tmp_path / "memory"
    psi.write_bytes(data)
    value = read_psi_some_avg10(psi)
    assert value is None or (isinstance(value, float) and 0 <= value <= 100)
