"""``srt oarbank admit|release|status|doctor``: the srt client commands of the node agent,
against a real agent (the library's) over fake modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from node_agent_kit import BundleFactory, NodeAgent, colima
from oarbank_testkit import ProcessTracker, wait_until

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


def test_run_admits_before_the_command_and_releases_after_it(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, short_dir: Path
) -> None:
    """``srt oarbank run``: the on_demand vm starts for the first admission and is ready
    before the command runs, the command sees its attempt id, the release comes when the
    command ends (the vm then stops after its 1 s idle timeout), and a refusal fails with
    the protocol's reason before the command runs."""
    vm = colima(bundle_factory, tmp_path / "outside")
    agent = NodeAgent(tmp_path, short_dir, procs, vm)
    agent.start()
    out = tmp_path / "out"
    wrapper = [sys.executable, "-m", "srt_services", "oarbank", "run", "--socket"]
    try:
        assert agent.service("colima", "vm")["state"] == "stopped"
        status_file = tmp_path / "status-seen"
        done = subprocess.run(
            [
                *wrapper,
                str(agent.socket),
                "--attempt",
                "bench-1",
                "--need",
                "colima/vm",
                "--pool",
                "colima/containers=1",
                "--",
                sys.executable,
                "-c",
                "import json, os, sys; from oarbank_protocol.agent.control import request; "
                "from pathlib import Path; "
                f"s = request(Path({str(agent.socket)!r}), {{'op': 'status'}}, 30); "
                f"Path({str(status_file)!r}).write_text(json.dumps(s)); "
                f"Path({str(out)!r}).write_text(os.environ['OARBANK_ATTEMPT_ID']); sys.exit(3)",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=90,
        )
        assert done.returncode == 3, done.stdout + done.stderr  # the command's own status
        assert out.read_text() == "bench-1"
        seen = json.loads(status_file.read_text())["modules"]["colima"]
        assert seen["services"]["vm"]["state"] == "ready", "ran before the vm was ready"
        assert seen["admissions"] == ["bench-1"]
        assert seen["pools"]["reserved"] == {"containers": 1}
        status = agent.status()["modules"]["colima"]
        assert status["admissions"] == [] and status["pools"]["reserved"] == {}
        assert wait_until(lambda: agent.service("colima", "vm")["state"] == "stopped", 20)
        out.unlink()
        refused = subprocess.run(
            [
                *wrapper,
                str(agent.socket),
                "--attempt",
                "greedy",
                "--pool",
                "colima/containers=5",
                "--",
                "touch",
                str(out),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert refused.returncode == 75, refused.stderr
        assert "refused (PoolExhausted)" in refused.stderr and "5 token(s)" in refused.stderr
        assert not out.exists(), "the command ran although the admission was refused"
    finally:
        assert agent.stop() == 0, agent.log()
