"""A node agent (``python -m oarbank_protocol.agent.node``) as a test drives it: a real
process over fake modules, spoken to through its control socket.

Shared by the library's node-agent tests and the srt adapter's test of the ``srt oarbank``
client commands, which talk to the same agent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from oarbank_protocol.agent.control import request
from oarbank_testkit import SRC_DIR, FakeBundle, ProcessTracker, service_entry, wait_until

BundleFactory = Callable[..., FakeBundle]


class NodeAgent:
    def __init__(self, tmp: Path, sock_dir: Path, procs: ProcessTracker, *bundles: FakeBundle):
        self.tmp = tmp
        self.bundles = bundles
        self.data = tmp / "node-data"
        self.socket = sock_dir / "agent.sock"
        self.log_path = tmp / "node-agent.log"
        self.proc: subprocess.Popen[bytes] | None = None
        procs.watch(self.data)

    def start(self, *extra: str) -> None:
        argv = [sys.executable, "-m", "oarbank_protocol.agent.node"]
        for fake in self.bundles:
            argv += ["--bundle", str(fake.root)]
        argv += ["--node-id", "node-1", "--data-root", str(self.data), "--socket", str(self.socket)]
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SRC_DIR)}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([*argv, *extra], env=env, stdout=log, stderr=log)
        assert wait_until(self.up, 20), self.log()

    def up(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            return bool(self.call({"op": "status"})["ok"])
        except OSError:
            return False

    def call(self, payload: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
        return request(self.socket, payload, timeout)

    def admit(self, attempt: str, **want: Any) -> dict[str, Any]:
        return self.call({"op": "admit", "attempt_id": attempt, **want})

    def status(self) -> dict[str, Any]:
        return self.call({"op": "status"})

    def service(self, module: str, name: str) -> dict[str, Any]:
        value: dict[str, Any] = self.status()["modules"][module]["services"][name]
        return value

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(60)

    def calls(self, module: str, service: str, op: str) -> list[dict[str, Any]]:
        path = self.data / module / "fake-state" / service / "calls.jsonl"
        if not path.exists():
            return []
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        return [e for e in entries if e["event"] == "begin" and e["op"] == op]


def colima(factory: BundleFactory, outside: Path, **vm: Any) -> FakeBundle:
    outside.mkdir(exist_ok=True)
    entry = service_entry(
        "vm",
        lifecycle="on_demand",
        pools=["containers"],
        reserves_host_memory=True,
        idle_timeout_s=1.0,
        **vm,
    )
    return factory(
        module="colima",
        services=[entry],
        config={
            "pools": {"containers": 2},
            "reserve_mem_gb": 4,
            "start_creates": [{"id": "disk-1", "kind": "volume", "path": str(outside / "disk")}],
        },
    )
