"""The module sandbox (bubblewrap): a module reaching outside its grants fails, a granted
reach works, and a module that cannot be confined as it asks is refused before it runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oarbank_protocol.agent.control import request
from oarbank_protocol.conformance.cli import main as conformance_main
from oarbank_protocol.documents import Fingerprint, OpResult, Status
from oarbank_protocol.errors import ManifestError, SandboxRefused
from oarbank_protocol.execution.bundle import Bundle, load_bundle
from oarbank_protocol.execution.sandbox import SitePolicy, ungranted
from oarbank_protocol.manifest import MANIFEST_FILE, SandboxSpec, parse_manifest
from oarbank_testkit import wait_until

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")

# The probe does what its settings say and reports healthy only if that worked.
PROBE = """#!/usr/bin/python3
import json, os, socket, subprocess, sys
settings = json.load(open(os.environ["OARBANK_SETTINGS_FILE"]))
action, target = settings["action"], settings.get("target", "")
try:
    if action == "write":
        with open(target, "w") as handle:
            handle.write("x")
    elif action == "read":
        with open(target) as handle:
            handle.read()
    elif action == "connect":
        host, port = target.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=2).close()
    elif action == "tool":
        tools = json.load(open(os.environ["OARBANK_TOOLS_FILE"]))
        subprocess.run([tools[target], "ok"], check=True, capture_output=True)
    doc = {"health": "healthy"}
except Exception as exc:
    doc = {"health": "unhealthy", "detail": f"{type(exc).__name__}: {exc}"}
print(json.dumps(doc))
"""


def make_bundle(root: Path, sandbox: dict[str, Any] | None) -> Bundle:
    root.mkdir(parents=True)
    probe = root / "bin" / "probe"
    probe.parent.mkdir()
    probe.write_text(PROBE)
    probe.chmod(0o755)
    manifest: dict[str, Any] = {"name": "boxed", "probes": [{"name": "cap", "exec": ["bin/probe"]}]}
    if sandbox is not None:
        manifest["sandbox"] = sandbox
    (root / MANIFEST_FILE).write_text(json.dumps(manifest))
    return load_bundle(root)


def fingerprint(
    bundle: Bundle,
    data: Path,
    settings: dict[str, Any],
    site: SitePolicy | None = None,
    tools: dict[str, Any] | None = None,
) -> Fingerprint:
    context = bundle.context(
        node_id="n1", data_dir=data, settings=settings, tools=tools or {}, site=site
    )
    executor = bundle.executor(bundle.manifest.probe("cap"), context)
    return executor.call_sync("fingerprint", Fingerprint).document


@pytest.fixture
def listener() -> Iterator[str]:
    """A loopback TCP listener that accepts (and drops) connections."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except TimeoutError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


@needs_bwrap
def test_a_confined_module_writes_only_its_data_directory(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", {})
    data = tmp_path / "data"
    outside = tmp_path / "outside.txt"
    inside = data / "inside.txt"
    assert fingerprint(bundle, data, {"action": "write", "target": str(inside)}).health == (
        "healthy"
    )
    assert inside.read_text() == "x"
    refused = fingerprint(bundle, data, {"action": "write", "target": str(outside)})
    assert refused.health == "unhealthy"
    assert not outside.exists()
    # nor through a host process's root (/proc/PID/root of the agent, same user)
    via_proc = f"/proc/{os.getpid()}/root{outside}"
    assert fingerprint(bundle, data, {"action": "write", "target": via_proc}).health == (
        "unhealthy"
    )
    assert not outside.exists()
    # the bundle itself is read-only
    in_bundle = bundle.root / "dropped"
    assert fingerprint(bundle, data, {"action": "write", "target": str(in_bundle)}).health == (
        "unhealthy"
    )
    assert not in_bundle.exists()


@needs_bwrap
def test_a_confined_module_reads_only_granted_paths(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "model.txt").write_text("weights")
    data = tmp_path / "data"
    settings = {"action": "read", "target": str(shared / "model.txt")}
    unconfined = make_bundle(tmp_path / "plain", None)
    assert fingerprint(unconfined, data, settings).health == "healthy"
    without = make_bundle(tmp_path / "without", {})
    result = fingerprint(without, data, settings)
    assert result.health == "unhealthy"
    assert "FileNotFoundError" in result.detail
    granted = make_bundle(tmp_path / "granted", {"paths": [{"path": str(shared)}]})
    site = SitePolicy(approved_paths=(tmp_path,))
    assert fingerprint(granted, data, settings, site=site).health == "healthy"
    # read-only unless the grant says write
    write = {"action": "write", "target": str(shared / "new.txt")}
    assert fingerprint(granted, data, write, site=site).health == "unhealthy"
    writable = make_bundle(tmp_path / "writable", {"paths": [{"path": str(shared), "write": True}]})
    assert fingerprint(writable, data, write, site=site).health == "healthy"
    assert (shared / "new.txt").read_text() == "x"


@needs_bwrap
def test_network_only_when_granted_and_approved(tmp_path: Path, listener: str) -> None:
    data = tmp_path / "data"
    settings = {"action": "connect", "target": listener}
    no_net = make_bundle(tmp_path / "nonet", {})
    assert fingerprint(no_net, data, settings).health == "unhealthy"
    net = make_bundle(tmp_path / "net", {"network": True})
    assert fingerprint(net, data, settings, site=SitePolicy(allow_network=True)).health == (
        "healthy"
    )
    with pytest.raises(SandboxRefused, match="network is not approved"):
        fingerprint(net, data, settings)


@needs_bwrap
def test_host_tools_are_bound_in_only_when_declared(tmp_path: Path) -> None:
    tool_dir = tmp_path / "opt-tools"
    tool_dir.mkdir()
    tool = tool_dir / "mytool"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    data = tmp_path / "data"
    settings = {"action": "tool", "target": "mytool"}
    declared = make_bundle(tmp_path / "declared", {"tools": ["mytool"]})
    tools = {"mytool": str(tool), "other": "/usr/bin/true"}
    assert fingerprint(declared, data, settings, tools=tools).health == "healthy"
    # the tools file holds only the declared tools
    assert json.loads((data / ".oarbank" / "tools.json").read_text()) == {"mytool": str(tool)}
    undeclared = make_bundle(tmp_path / "undeclared", {})
    result = fingerprint(undeclared, tmp_path / "data2", settings, tools=tools)
    assert result.health == "unhealthy"
    with pytest.raises(SandboxRefused, match="host tool 'mytool' is not granted"):
        fingerprint(declared, data, settings, tools={})


def test_an_unapproved_path_refuses_the_module_before_it_runs(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", {"paths": [{"path": "/srv/models", "write": True}]})
    with pytest.raises(SandboxRefused, match="/srv/models \\(read-write\\) is not inside"):
        bundle.context(node_id="n1", data_dir=tmp_path / "data", site=SitePolicy())
    assert not (tmp_path / "data").exists()
    approved = SitePolicy(approved_paths=(Path("/srv"),))
    assert (
        ungranted(SandboxSpec.model_validate({"paths": [{"path": "/srv/models"}]}), approved, {})
        == []
    )


def test_no_bubblewrap_refuses_unless_the_site_allows_unconfined(tmp_path: Path) -> None:
    bundle = make_bundle(tmp_path / "bundle", {})
    with pytest.raises(SandboxRefused, match="bubblewrap \\(bwrap\\) is not installed"):
        bundle.context(node_id="n1", data_dir=tmp_path / "data", site=SitePolicy(bwrap=None))
    context = bundle.context(
        node_id="n1",
        data_dir=tmp_path / "data",
        site=SitePolicy(bwrap=None, allow_unconfined=True),
    )
    assert context.confinement is None


def test_a_relative_granted_path_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=re.escape("sandbox.paths.0.path")):
        make_bundle(tmp_path / "bundle", {"paths": [{"path": "models"}]})


# A service whose start leaves a daemon behind: the daemon outlives the confined op (no PID
# namespace) and stays confined (it cannot write outside the data directory either).
SERVICE = """#!/bin/sh
pidfile="$OARBANK_MODULE_DATA/daemon.pid"
running() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }
case "$1" in
  start)
    running || { setsid sh -c 'echo escaped > "$OARBANK_MODULE_DATA/../escaped.txt"
        exec sleep 300' </dev/null >/dev/null 2>&1 & echo $! > "$pidfile"; }
    echo '{"changed": true}' ;;
  stop)
    running && kill "$(cat "$pidfile")"; rm -f "$pidfile"; echo '{"changed": true}' ;;
  status|ready)
    if running; then echo '{"running": true, "ready": true}';
    else echo '{"running": false, "ready": false}'; fi ;;
  fingerprint)
    if running; then r=true; else r=false; fi
    echo "{\\"health\\": \\"healthy\\", \\"running\\": $r}" ;;
  list_owned) echo '{"objects": []}' ;;
  destroy) echo '{}' ;;
esac
"""


@needs_bwrap
def test_a_confined_service_keeps_its_daemon_and_the_daemon_stays_confined(
    tmp_path: Path,
) -> None:
    root = tmp_path / "svcbundle"
    (root / "bin").mkdir(parents=True)
    script = root / "bin" / "svc"
    script.write_text(SERVICE)
    script.chmod(0o755)
    manifest = {"name": "boxed", "services": [{"name": "svc", "exec": ["bin/svc"]}], "sandbox": {}}
    (root / MANIFEST_FILE).write_text(json.dumps(manifest))
    bundle = load_bundle(root)
    data = tmp_path / "data"
    escape = tmp_path / "escaped.txt"
    context = bundle.context(node_id="n1", data_dir=data)
    assert context.confinement is not None
    executor = bundle.executor(bundle.manifest.service("svc"), context)
    executor.call_sync("start", OpResult)
    try:
        assert executor.call_sync("status", Status).document.running
        pid = int((data / "daemon.pid").read_text())
        assert Path(f"/proc/{pid}").exists()
        # the daemon lives in the sandbox's mount namespace, not the agent's
        assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        # once it is `sleep`, it has tried its write outside the data directory
        assert wait_until(lambda: b"sleep" in Path(f"/proc/{pid}/cmdline").read_bytes())
        assert not escape.exists()
    finally:
        executor.call_sync("stop", OpResult)
    assert not executor.call_sync("status", Status).document.running


def test_the_node_agent_refuses_a_module_whose_grants_the_site_does_not_approve(
    tmp_path: Path,
) -> None:
    bundle = make_bundle(tmp_path / "bundle", {"paths": [{"path": str(tmp_path / "models")}]})
    command = [
        sys.executable,
        "-m",
        "oarbank_protocol.agent.node",
        "--bundle",
        str(bundle.root),
        "--node-id",
        "n1",
        "--data-root",
        str(tmp_path / "data"),
    ]
    refused = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "is not inside a path the site approves" in refused.stderr
    assert str(tmp_path / "models") in refused.stderr


@needs_bwrap
def test_conformance_flags_a_module_that_needs_an_ungranted_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "model.txt").write_text("weights")
    bundle = make_bundle(tmp_path / "bundle", {"paths": [{"path": str(shared)}]})
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"action": "read", "target": str(shared / "model.txt")}))
    common = ["--probe", "--bundle", str(bundle.root), "--settings", str(settings)]
    assert conformance_main([*common, "--data", str(tmp_path / "d1")]) == 1
    out = capsys.readouterr().out
    assert "FAIL SP-035" in out
    assert f"path {shared} (read-only) is not inside a path the site approves" in out
    granted = [*common, "--data", str(tmp_path / "d2"), "--grant-path", str(tmp_path)]
    assert conformance_main(granted) == 0
    out = capsys.readouterr().out
    assert "SP-035" in out and "confined with bubblewrap" in out


@needs_bwrap
def test_the_node_agent_admits_on_a_confined_probe_and_reports_the_sandbox(
    tmp_path: Path, short_dir: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "model.txt").write_text("weights")
    bundle = make_bundle(tmp_path / "bundle", {"paths": [{"path": str(shared)}]})
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"action": "read", "target": str(shared / "model.txt")}))
    sock = short_dir / "agent.sock"
    argv = [
        *[sys.executable, "-m", "oarbank_protocol.agent.node", "--bundle", str(bundle.root)],
        *["--node-id", "n1", "--data-root", str(tmp_path / "data"), "--socket", str(sock)],
        *["--settings", f"boxed={settings}", "--grant-path", str(shared)],
    ]
    log = tmp_path / "agent.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out)
    try:
        assert wait_until(sock.exists, 20), log.read_text()
        # the probe read its granted path inside the sandbox: the capability is there
        got = request(sock, {"op": "admit", "attempt_id": "a1", "needs": ["boxed/cap"]}, 60)
        assert got["ok"], got
        status = request(sock, {"op": "status"}, 10)
        assert status["modules"]["boxed"]["sandbox"] == {
            "confined": "bwrap",
            "paths": [{"path": str(shared), "write": False}],
            "network": False,
            "tools": [],
        }
    finally:
        proc.terminate()
        assert proc.wait(60) == 0, log.read_text()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
SANDBOX_LIKE = st.fixed_dictionaries(
    {},
    optional={
        "paths": st.lists(
            st.fixed_dictionaries({"path": st.text(max_size=30) | JSON}, optional={"write": JSON}),
            max_size=3,
        )
        | JSON,
        "network": JSON,
        "tools": st.lists(st.text(max_size=10), max_size=3) | JSON,
        "containers": JSON,
    },
)


@settings(max_examples=200, deadline=None)
@given(sandbox=SANDBOX_LIKE | JSON, approved=st.lists(st.text(max_size=20), max_size=3))
def test_any_sandbox_table_parses_or_is_a_manifest_error(sandbox: Any, approved: list[str]) -> None:
    """Whatever a manifest's ``sandbox`` holds: a model, or one ManifestError; a parsed one
    gives the site's verdict as sentences, never another error."""
    message = ""
    try:
        manifest = parse_manifest({"name": "m", "sandbox": sandbox})
    except ManifestError as exc:
        message = str(exc)
    if message:
        assert "sandbox" in message
        return
    if manifest.sandbox is None:
        return
    roots = tuple(Path("/" + a) if i % 2 else Path(a) for i, a in enumerate(approved))
    site = SitePolicy(approved_paths=roots, bwrap="/bin/false")
    problems = ungranted(manifest.sandbox, site, {"t": "/usr/bin/true"})
    assert all(isinstance(p, str) and p for p in problems)


def test_a_site_path_that_names_no_file_approves_nothing() -> None:
    spec = SandboxSpec.model_validate({"paths": [{"path": "/srv/models"}]})
    for root in ("/srv\x00x", "srv"):
        site = SitePolicy(approved_paths=(Path(root),))
        assert ungranted(spec, site, {}) == [
            "path /srv/models (read-only) is not inside a path the site approves"
        ]


@needs_bwrap
def test_a_granted_path_missing_on_this_node_is_absent_not_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "not-here"
    bundle = make_bundle(tmp_path / "bundle", {"paths": [{"path": str(missing)}]})
    site = SitePolicy(approved_paths=(tmp_path,))
    data = tmp_path / "data"
    inside = data / "ok.txt"
    assert fingerprint(
        bundle, data, {"action": "write", "target": str(inside)}, site=site
    ).health == ("healthy")
    result = fingerprint(bundle, data, {"action": "read", "target": str(missing)}, site=site)
    assert result.health == "unhealthy" and "FileNotFoundError" in result.detail
