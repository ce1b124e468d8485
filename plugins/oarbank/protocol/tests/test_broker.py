"""The container broker with real podman: a confined module asks for a container its
manifest declares, the agent's broker starts it labelled for the attempt, it appears in the
service's ``list_owned`` as the agent sees it, and the teardown leaves no container. The
module's own try to run podman inside its sandbox fails.

The image is built here from the host's ``/bin/sh`` and ``/bin/sleep`` with their
libraries (``podman import`` of a tarball: nothing is pulled). podman's settings for this
kind of host (runc, cgroupfs, lower ulimits) come from the broker's environment variables,
as a site would set them.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oarbank_protocol.execution.broker import PREFIX
from oarbank_protocol.execution.bundle import load_bundle
from oarbank_protocol.execution.sandbox import SitePolicy
from oarbank_protocol.lifecycle.manager import ModuleManager
from oarbank_protocol.lifecycle.reaper import static_liveness
from oarbank_testkit import wait_until

PODMAN = shutil.which("podman")
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(PODMAN is None, reason="podman is not installed (Debian: podman runc)"),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed"),
]
IMAGE = "localhost/oarbank-test-sh:1"
PODMAN_ARGS = "--runtime runc --cgroup-manager cgroupfs" if shutil.which("runc") else ""
RUN_ARGS = "--ulimit nofile=4096:4096 --ulimit nproc=4096:4096"

MODULE = r"""#!/usr/bin/python3
import json, os, socket, subprocess, sys
data = os.environ["OARBANK_MODULE_DATA"]
marker = os.path.join(data, "running")
op = sys.argv[1]

def broker(request):
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(os.environ["OARBANK_BROKER_SOCKET"])
        s.sendall(json.dumps(request).encode() + b"\n")
        return json.loads(s.makefile().readline())

if op == "start":
    if not os.path.exists(marker):
        try:
            own = subprocess.run(["podman", "run", "--rm", "IMAGE", "/bin/sh", "-c", "true"],
                                 capture_output=True, text=True, timeout=60)
            tried = {"code": own.returncode, "stderr": own.stderr[-300:]}
        except OSError as exc:
            tried = {"code": None, "stderr": str(exc)}
        open(os.path.join(data, "self-start.json"), "w").write(json.dumps(tried))
        got = broker({"op": "start", "container": "sleeper", "attempt_id": "att-1",
                      "service": os.environ["OARBANK_SERVICE"]})
        open(os.path.join(data, "broker-answer.json"), "w").write(json.dumps(got))
        if not got.get("ok"):
            print(json.dumps({"code": 11, "msg": got.get("error", "broker refused")}))
            sys.exit(1)
        open(marker, "w").write(got["id"])
        print(json.dumps({"changed": True, "created": [got["id"]]}))
    else:
        print(json.dumps({"changed": False}))
elif op in ("status", "ready"):
    up = os.path.exists(marker)
    print(json.dumps({"running": up, "ready": up}))
elif op == "fingerprint":
    print(json.dumps({"health": "healthy", "running": os.path.exists(marker)}))
elif op == "stop":
    if os.path.exists(marker):
        os.unlink(marker)
    print(json.dumps({"changed": True}))
elif op == "list_owned":
    print(json.dumps({"objects": []}))
elif op == "destroy":
    print(json.dumps({"changed": False}))
else:
    sys.exit(2)
"""


def podman(*args: str) -> str:
    argv = [str(PODMAN), *PODMAN_ARGS.split(), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120).stdout


def _files_for(binary: str) -> set[str]:
    real = os.path.realpath(binary)
    out = subprocess.run(["ldd", real], capture_output=True, text=True, check=False).stdout
    libs = {word for word in out.split() if word.startswith("/")}
    return {real, *libs}


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tiny local image; built (and removed afterwards) only when it is not there."""
    if podman("images", "-q", IMAGE).strip():
        yield IMAGE
        return
    tar_path = tmp_path_factory.mktemp("image") / "rootfs.tar"
    members: dict[str, str] = {}
    for binary in ("/bin/sh", "/bin/sleep"):
        # the files themselves, never a link (the loader is a link to /lib/...)
        members.update({path.lstrip("/"): os.path.realpath(path) for path in _files_for(binary)})
        members[binary.lstrip("/")] = os.path.realpath(binary)
    with tarfile.open(tar_path, "w") as tar:
        for arcname, path in sorted(members.items()):
            tar.add(path, arcname=arcname)
    podman("import", "-q", str(tar_path), IMAGE)
    try:
        yield IMAGE
    finally:
        subprocess.run(
            [str(PODMAN), *PODMAN_ARGS.split(), "rmi", "-f", IMAGE],
            capture_output=True,
            check=False,
        )


def make_module(root: Path, image: str) -> Path:
    (root / "bin").mkdir(parents=True)
    exe = root / "bin" / "mod"
    exe.write_text(MODULE.replace("IMAGE", image))
    exe.chmod(0o755)
    manifest: dict[str, Any] = {
        "name": "boxes",
        "services": [
            {
                "name": "svc",
                "exec": ["bin/mod"],
                "lifecycle": "always",
                "ready_poll_s": 0.05,
                "ready_timeout_s": 60,
                "status_period_s": 0.5,
            }
        ],
        "sandbox": {
            "containers": [{"name": "sleeper", "image": image, "argv": ["/bin/sleep", "300"]}]
        },
    }
    (root / "oarbank-module.json").write_text(json.dumps(manifest))
    return root


def containers() -> list[dict[str, Any]]:
    out = podman("ps", "-a", "--filter", "label=oarbank.module=boxes", "--format", "json")
    rows: list[dict[str, Any]] = json.loads(out or "[]") or []
    return rows


def test_the_broker_starts_a_declared_container_that_is_owned_and_torn_down(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OARBANK_PODMAN_ARGS", PODMAN_ARGS)
    monkeypatch.setenv("OARBANK_PODMAN_RUN_ARGS", RUN_ARGS)
    assert containers() == [], "a container of this module exists before the test"
    bundle = load_bundle(make_module(tmp_path / "bundle", image))
    data = tmp_path / "data"
    context = bundle.context(node_id="n1", data_dir=data, site=SitePolicy())
    assert context.confinement is not None, "the module must run confined"

    sockets: list[Path] = []

    async def scenario() -> None:
        manager = ModuleManager.for_bundle(bundle, context)
        assert manager.broker_socket is not None
        sockets.append(manager.broker_socket)
        await manager.start()
        try:
            sup = manager.services["svc"]
            for _ in range(600):
                if sup.snapshot().state == "ready":
                    break
                await asyncio.sleep(0.1)
            assert sup.snapshot().state == "ready", (data / "broker-answer.json").read_text()
            owned = (await sup.ops.list_owned()).objects
            (box,) = [o for o in owned if o.kind == "container"]
            assert box.id.startswith(PREFIX)
            assert box.labels["oarbank.attempt_id"] == "att-1"
            assert (box.labels["oarbank.node"], box.labels["oarbank.service"]) == ("n1", "svc")
            (row,) = containers()
            assert row["State"] == "running" and PREFIX + row["Id"] == box.id
            assert row["Labels"]["oarbank.container"] == "sleeper"
            # the reaper goes by the attempt: a live one's container stays
            report = await sup.reap_once(static_liveness(["att-1"]))
            assert not report.destroyed and len(containers()) == 1, report
        finally:
            await manager.shutdown(reap=True, reap_liveness=static_liveness(()))

    asyncio.run(scenario())
    assert wait_until(lambda: containers() == [], 30), containers()
    # the module could not run podman itself inside its sandbox
    tried = json.loads((data / "self-start.json").read_text())
    assert tried["code"] != 0, tried
    print("podman inside the sandbox:", tried)
    assert not sockets[0].parent.exists(), "the broker's socket outlived the agent"


def test_the_broker_starts_only_what_the_manifest_declares(
    image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from oarbank_protocol.execution.broker import ContainerBroker
    from oarbank_protocol.manifest import ContainerSpec

    monkeypatch.setenv("OARBANK_PODMAN_ARGS", PODMAN_ARGS)
    broker = ContainerBroker.for_specs(
        "boxes", "n1", [ContainerSpec(name="sleeper", image=image, argv=["/bin/sleep", "1"])]
    )
    answer = asyncio.run(
        broker.answer({"op": "start", "container": "shell", "attempt_id": "a", "service": "svc"})
    )
    assert not answer["ok"] and "declares no container 'shell' (sleeper)" in answer["error"]
    bad = asyncio.run(
        broker.answer(
            {"op": "start", "container": "sleeper", "attempt_id": "../x", "service": "svc"}
        )
    )
    assert not bad["ok"]
    assert asyncio.run(broker.answer({"op": "rm"}))["error"].startswith("unknown op")
    assert containers() == []
