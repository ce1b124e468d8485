"""A probe monitor on the real clock: it fingerprints the probe every ``period_s``."""

from __future__ import annotations

import asyncio

import pytest
from oarbank_protocol.lifecycle.clock import SystemClock
from oarbank_protocol.lifecycle.probes import ProbeMonitor
from oarbank_protocol.manifest import ProbeSpec
from oarbank_testkit import FakeOps, run

pytestmark = pytest.mark.timeout(60)


def test_probe_period_real_time() -> None:
    ops = FakeOps("jdk")
    spec = ProbeSpec(name="jdk", exec=["x"], period_s=0.2)

    async def main() -> int:
        monitor = ProbeMonitor(spec, ops, clock=SystemClock())
        task = asyncio.ensure_future(monitor.run())
        await asyncio.sleep(1.05)
        task.cancel()
        return monitor.checks

    checks = run(main())
    assert 4 <= checks <= 7, f"{checks} checks in ~1 s with period 0.2 s"
