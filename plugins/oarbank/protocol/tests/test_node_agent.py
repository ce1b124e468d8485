"""The node agent (``python -m oarbank_protocol.agent.node``, ``srt oarbank agent`` in srt):
bundles of modules on a node, admission with pools, host memory, on_demand and yieldable,
doctor-triggered probe runs, teardown through the protocol.

The agent runs as a real process over the fake module's real executables; tests talk to it
through its control socket, as a user would (the ``srt oarbank`` client commands are tested
with the srt adapter).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from node_agent_kit import BundleFactory, NodeAgent, colima
from oarbank_protocol.errors import MemoryExhausted, PoolExhausted
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_testkit import SRC_DIR, FakeBundle, ProcessTracker, alive, service_entry, wait_until

pytestmark = pytest.mark.timeout(120)


def java(factory: BundleFactory, **cache: Any) -> FakeBundle:
    entry = service_entry("cache", lifecycle="always", **cache)
    probe = {"name": "jdk17", "exec": ["bin/fake"], "period_s": 300, "failure_threshold": 1}
    return factory(module="java", services=[entry], probes=[probe])


def test_L01_L06_admission_with_pools_memory_and_on_demand(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    outside = tmp_path / "outside"
    vm, jvm = colima(bundle_factory, outside), java(bundle_factory)
    agent = NodeAgent(tmp_path, short_dir, procs, vm, jvm)
    agent.start("--mem-budget-gb", "10")
    try:
        assert wait_until(lambda: agent.service("java", "cache")["state"] == "ready", 15)
        assert agent.calls("colima", "vm", "start") == [], "on_demand started with no user"
        got = agent.admit("a1", needs=["colima/vm"], pools={"colima/containers": 1}, mem_gb=2)
        assert got["ok"], got
        assert got["modules"]["colima"]["services"] == ["vm"]
        vm_state = agent.service("colima", "vm")
        assert (vm_state["state"], vm_state["users"]) == ("ready", ["a1"])
        status = agent.status()
        assert status["modules"]["colima"]["pools"] == {
            "capacity": {"containers": 2},
            "reserved": {"containers": 1},
        }
        assert status["memory"]["charged_gb"] == 6  # the vm's 4 GB reservation + the job's 2
        starts = len(agent.calls("colima", "vm", "start"))
        refused = agent.admit("a2", pools={"containers": 2})  # a bare name, unique on the node
        assert not refused["ok"] and refused["kind"] == "PoolExhausted" and refused["retryable"]
        assert "requested 2 token(s), 1 free of 2" in refused["error"]
        refused = agent.admit("a3", mem_gb=5)
        assert refused["kind"] == "MemoryExhausted"
        assert "need 5 GB" in refused["error"] and "4 GB free of 10 GB" in refused["error"]
        assert len(agent.calls("colima", "vm", "start")) == starts, "started before refusing"
        unknown = agent.admit("a4", needs=["colima/nope"])
        assert unknown["kind"] == "UnknownCapability"
        probe = agent.admit("a5", needs=["jdk17"])
        assert probe["ok"] and probe["modules"]["java"]["probes"] == ["jdk17"]
        assert agent.call({"op": "release", "attempt_id": "a5"})["released"] is True
        assert agent.call({"op": "release", "attempt_id": "a1"})["released"] is True
        assert agent.call({"op": "release", "attempt_id": "a1"})["released"] is False
        assert wait_until(lambda: agent.service("colima", "vm")["state"] == "stopped", 15)
        assert agent.status()["memory"]["charged_gb"] == 0
        assert agent.status()["modules"]["colima"]["pools"]["reserved"] == {}
        assert agent.calls("colima", "vm", "stop"), "the idle on_demand service was not stopped"
        assert (outside / "disk").exists(), "reaped without knowing which attempts live"
    finally:
        code = agent.stop()
    assert code == 0, agent.log()
    assert not (outside / "disk").exists(), "teardown did not reap the owned object"
    assert agent.calls("java", "cache", "stop"), "the always service was not stopped"
    assert not [p for p in procs.recorded() if alive(p, procs.started)]


def test_idle_yieldable_services_of_other_modules_make_room(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    jvm = java(bundle_factory, yieldable=True, reserves_host_memory=True)
    jvm.update_config(reserve_mem_gb=4)
    agent = NodeAgent(tmp_path, short_dir, procs, jvm)
    agent.start("--mem-budget-gb", "6")
    try:
        assert wait_until(lambda: agent.service("java", "cache")["state"] == "ready", 15)
        assert agent.status()["memory"]["charged_gb"] == 4
        got = agent.admit("big", mem_gb=3)
        assert got["ok"], got
        cache = agent.service("java", "cache")
        assert cache["state"] == "stopped" and "yielded" in cache["reason"]
        assert agent.status()["memory"]["charged_gb"] == 3
        agent.call({"op": "release", "attempt_id": "big"})
        assert wait_until(lambda: agent.service("java", "cache")["state"] == "ready", 15)
        assert len(agent.calls("java", "cache", "start")) == 2
        too_big = agent.admit("huge", mem_gb=7)
        assert too_big["kind"] == "MemoryExhausted"
        assert agent.service("java", "cache")["state"] == "ready", "yielded for nothing"
    finally:
        assert agent.stop() == 0, agent.log()


def test_a_yielded_service_resumes_when_an_idle_stop_frees_the_memory(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    """The memory comes back by an on_demand service's idle stop, not by a release: the
    release leaves the vm charged (it idles for 1 s), so only the stop can end the yield."""
    vm = colima(bundle_factory, tmp_path / "outside")
    jvm = java(bundle_factory, yieldable=True, reserves_host_memory=True)
    jvm.update_config(reserve_mem_gb=4)
    agent = NodeAgent(tmp_path, short_dir, procs, vm, jvm)
    agent.start("--mem-budget-gb", "6")
    try:
        assert wait_until(lambda: agent.service("java", "cache")["state"] == "ready", 15)
        got = agent.admit("a1", needs=["colima/vm"])
        assert got["ok"], got
        assert "yielded" in agent.service("java", "cache")["reason"]
        assert agent.call({"op": "release", "attempt_id": "a1"})["released"] is True
        assert agent.service("java", "cache")["state"] == "stopped", "resumed with no room"
        assert agent.status()["memory"]["charged_gb"] == 4  # the idle vm, still running
        assert wait_until(lambda: agent.service("colima", "vm")["state"] == "stopped", 15)
        assert wait_until(lambda: agent.service("java", "cache")["state"] == "ready", 15), (
            agent.service("java", "cache")
        )
        assert agent.status()["memory"]["charged_gb"] == 4  # the cache's, charged again
        assert len(agent.calls("java", "cache", "start")) == 2
    finally:
        assert agent.stop() == 0, agent.log()


def test_doctor_runs_probes_now_on_request_on_sighup_and_after_a_refusal(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    jvm = java(bundle_factory)
    agent = NodeAgent(tmp_path, short_dir, procs, jvm)
    agent.start()
    probe_calls = lambda: len(agent.calls("java", "jdk17", "fingerprint"))  # noqa: E731
    try:
        assert agent.status()["modules"]["java"]["probes"]["jdk17"]["available"] is True
        jvm.update_config(services={"jdk17": {"health": "unhealthy", "detail": "JDK removed"}})
        before = probe_calls()
        report = agent.call({"op": "doctor"})["capabilities"]
        assert probe_calls() == before + 1, "doctor did not run the probe"
        assert report["java/jdk17"]["available"] is False
        assert report["java/jdk17"]["detail"] == "JDK removed"
        assert report["java/cache"]["available"] is True
        refused = agent.admit("a1", needs=["java/jdk17"])
        assert refused["kind"] == "CapabilityUnavailable" and "JDK removed" in refused["error"]
        jvm.update_config(services={})  # fixed on the host
        before = probe_calls()
        refused = agent.admit("a2", needs=["java/jdk17"])  # refused, and a doctor runs
        assert not refused["ok"]
        assert wait_until(lambda: probe_calls() > before, 10), "no doctor after the refusal"
        assert wait_until(
            lambda: agent.status()["modules"]["java"]["probes"]["jdk17"]["available"], 10
        )
        assert agent.admit("a3", needs=["java/jdk17"])["ok"]
        jvm.update_config(services={"jdk17": {"health": "unhealthy", "detail": "gone again"}})
        before = probe_calls()
        assert agent.proc is not None
        agent.proc.send_signal(signal.SIGHUP)
        assert wait_until(lambda: probe_calls() > before, 10), "SIGHUP ran no doctor"
        assert wait_until(
            lambda: not agent.status()["modules"]["java"]["probes"]["jdk17"]["available"], 10
        )
        assert "doctor" in agent.log()
    finally:
        assert agent.stop() == 0, agent.log()


def test_two_bundles_of_one_module_are_a_usage_error(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    vm = colima(bundle_factory, tmp_path / "outside")
    twice = NodeAgent(tmp_path / "x", short_dir / "y", procs, vm, vm)
    twice.data.mkdir(parents=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "oarbank_protocol.agent.node",
            "--bundle",
            str(vm.root),
            "--bundle",
            str(vm.root),
            "--node-id",
            "n",
            "--data-root",
            str(twice.data),
        ],
        env={"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(SRC_DIR)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2 and "two bundles are module 'colima'" in done.stderr


def test_module_views_share_the_memory_budget_but_not_names() -> None:
    node = NodeResources(mem_budget_gb=8)
    a, b = node.scoped("a"), node.scoped("b")
    a.set_capacity("vm", {"containers": 2})
    b.set_capacity("vm", {"containers": 1})
    assert (a.capacity("containers"), b.capacity("containers")) == (2, 1)
    a.reserve("job", {"containers": 2})
    with pytest.raises(PoolExhausted):
        a.reserve("job2", {"containers": 1})
    b.reserve("job", {"containers": 1})  # the same attempt id in another module
    a.charge("service:vm", 5)
    with pytest.raises(MemoryExhausted, match="b/service:vm 4 GB"):
        b.check_memory({"service:vm": 4})
    assert b.mem_free_gb() == 3
    a.release("job")
    assert (a.reserved("containers"), b.reserved("containers")) == (0, 1)
    assert a.snapshot().charges == {"service:vm": 5} and b.snapshot().charges == {}
