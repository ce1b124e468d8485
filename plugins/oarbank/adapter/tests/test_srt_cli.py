"""``srt oarbank admit|release|status|doctor``: the srt client commands of the node agent,
against a real agent (the library's) over fake modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from node_agent_kit import BundleFactory, NodeAgent, colima
from oarbank_testkit import ProcessTracker

pytestmark = pytest.mark.timeout(120)


def test_client_commands(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    vm = colima(bundle_factory, tmp_path / "outside")
    agent = NodeAgent(tmp_path, short_dir, procs, vm)
    agent.start()

    def srt(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "srt_services", "oarbank", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )

    try:
        sock = str(agent.socket)
        done = srt("admit", "--socket", sock, "--attempt", "j1", "--need", "colima/vm")
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["modules"]["colima"]["services"] == ["vm"]
        done = srt("admit", "--socket", sock, "--attempt", "j2", "--pool", "colima/containers=5")
        assert done.returncode == 75, "a pool refusal is retryable"
        done = srt("status", "--socket", sock)
        assert json.loads(done.stdout)["modules"]["colima"]["admissions"] == ["j1"]
        assert srt("release", "--socket", sock, "--attempt", "j1").returncode == 0
        assert srt("doctor", "--socket", sock).returncode == 0
        done = srt("admit", "--socket", sock, "--attempt", "../x", "--need", "vm")
        assert done.returncode == 1 and "attempt id" in done.stdout
    finally:
        assert agent.stop() == 0, agent.log()


def test_agent_command_runs_the_library_node_agent(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    """``srt oarbank agent`` is the library's node agent under srt's name (its usage errors
    say so)."""
    vm = colima(bundle_factory, tmp_path / "outside")
    agent = [sys.executable, "-m", "srt_services", "oarbank", "agent"]
    twice = ["--bundle", str(vm.root), "--bundle", str(vm.root)]
    done = subprocess.run(
        [*agent, *twice, "--node-id", "n", "--data-root", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2 and "two bundles are module 'colima'" in done.stderr
    done = subprocess.run(
        [*agent, "--node-id"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2 and "usage: srt oarbank agent" in done.stderr
