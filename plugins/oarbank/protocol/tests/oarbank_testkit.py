"""Test helpers: fake bundles on disk, a process-survivor oracle, an in-memory ServiceOps.

Named ``oarbank_testkit`` (not ``helpers``) so it cannot collide with another plugin's test
helpers on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from oarbank_protocol.documents import (
    LABEL_ATTEMPT,
    LABEL_NODE,
    LABEL_SERVICE,
    Fingerprint,
    OpResult,
    OwnedList,
    OwnedObject,
    Status,
)
from oarbank_protocol.errors import ExecError, OpFailed
from oarbank_protocol.execution.bundle import Bundle, load_bundle
from oarbank_protocol.execution.client import ProtocolClient
from oarbank_protocol.execution.environment import ExecContext
from oarbank_protocol.execution.executor import ExecLimits, Executor
from oarbank_protocol.lifecycle.clock import FakeClock
from oarbank_protocol.lifecycle.manager import ModuleManager

TESTS_DIR = Path(__file__).resolve().parent
SRC_DIR = TESTS_DIR.parent / "src"
FAKE_MODULE = TESTS_DIR / "fake_module.py"
NODE = "node-1"


# --------------------------------------------------------------------------- waiting


def wait_until(pred: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return pred()


async def async_wait_until(
    pred: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02
) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        await asyncio.sleep(interval)
    return pred()


async def advance_until(
    clock: FakeClock,
    pred: Callable[[], bool],
    *,
    step: float = 1.0,
    timeout: float = 15.0,
    max_fake: float = 10_000.0,
) -> bool:
    """Advance fake time in steps, giving real subprocesses real time between steps."""
    deadline = time.monotonic() + timeout
    advanced = 0.0
    while time.monotonic() < deadline and advanced <= max_fake:
        if pred():
            return True
        await clock.advance(step)
        advanced += step
        await asyncio.sleep(0.01)
    return pred()


# --------------------------------------------------------------------------- processes


def alive(pid: int, created_after: float | None = None) -> bool:
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return not (created_after is not None and proc.create_time() < created_after - 1)
    except psutil.Error:
        return False


class ProcessTracker:
    """The "no survivors" oracle: every PID our fakes recorded must be gone at the end."""

    def __init__(self) -> None:
        self.started = time.time()
        self.roots: list[Path] = []
        self.pids: set[int] = set()

    def watch(self, root: Path) -> None:
        self.roots.append(root)

    def add(self, pid: int) -> None:
        self.pids.add(pid)

    def recorded(self) -> set[int]:
        pids = set(self.pids)
        for root in self.roots:
            if not root.exists():
                continue
            for name in ("service-pids.txt", "grandchildren.txt"):
                for path in root.rglob(name):
                    for line in path.read_text().split():
                        pids.add(int(line))
            for path in root.rglob("calls.jsonl"):
                for line in path.read_text().splitlines():
                    try:
                        pids.add(int(json.loads(line)["pid"]))
                    except (ValueError, KeyError):
                        continue
        pids.discard(os.getpid())
        return pids

    def survivors(self) -> list[int]:
        return sorted(p for p in self.recorded() if alive(p, self.started))

    def kill_all(self) -> None:
        for pid in self.survivors():
            try:
                proc = psutil.Process(pid)
                if proc.create_time() >= self.started - 1:
                    proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue

    def assert_none_survive(self, timeout: float = 5.0) -> None:
        if wait_until(lambda: not self.survivors(), timeout):
            return
        left = []
        for pid in self.survivors():
            try:
                left.append(f"{pid}: {' '.join(psutil.Process(pid).cmdline())}")
            except psutil.Error:
                continue
        self.kill_all()
        raise AssertionError("processes survived the test:\n" + "\n".join(left))


# --------------------------------------------------------------------------- fake bundles


def service_entry(name: str = "svc", **overrides: Any) -> dict[str, Any]:
    """A manifest service entry with test-friendly (short) timings."""
    entry: dict[str, Any] = {
        "name": name,
        "exec": ["bin/fake"],
        "lifecycle": "on_demand",
        "idle_timeout_s": 5.0,
        "ready_poll_s": 0.05,
        "ready_timeout_s": 5.0,
        "status_period_s": 0.2,
        "fingerprint_period_s": 0.5,
        "restart": {"backoff_initial_s": 0.1, "backoff_max_s": 0.5, "max_failures": 3},
    }
    entry.update(overrides)
    return entry


@dataclass
class FakeBundle:
    root: Path
    data_dir: Path
    node_id: str = NODE
    module: str = "fakemod"
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def config_path(self) -> Path:
        return self.root / "fake-module.json"

    def config(self) -> dict[str, Any]:
        if not self.config_path.exists():
            return {}
        value: dict[str, Any] = json.loads(self.config_path.read_text())
        return value

    def set_config(self, config: dict[str, Any]) -> None:
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(config))
        os.replace(tmp, self.config_path)

    def update_config(self, **changes: Any) -> None:
        config = self.config()
        config.update(changes)
        self.set_config(config)

    def set_op(self, op: str, **knobs: Any) -> None:
        config = self.config()
        ops = config.setdefault("ops", {})
        ops[op] = knobs
        self.set_config(config)

    def state_dir(self, service: str = "svc") -> Path:
        return self.data_dir / "fake-state" / service

    def calls(
        self, op: str | None = None, service: str = "svc", event: str = "begin"
    ) -> list[dict[str, Any]]:
        custom = self.config().get("call_log")
        path = Path(custom) if custom else self.state_dir(service) / "calls.jsonl"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry["event"] != event or entry.get("service") != service:
                continue
            if op is None or entry["op"] == op:
                out.append(entry)
        return out

    def service_pid(self, service: str = "svc") -> int | None:
        path = self.state_dir(service) / "service.json"
        if not path.exists():
            return None
        pid = int(json.loads(path.read_text())["pid"])
        return pid if alive(pid) else None

    def service_pids(self, service: str = "svc") -> list[int]:
        path = self.state_dir(service) / "service-pids.txt"
        return [int(x) for x in path.read_text().split()] if path.exists() else []

    def signals(self, service: str = "svc") -> list[str]:
        path = self.state_dir(service) / "signals.log"
        return path.read_text().splitlines() if path.exists() else []

    def objects(self, service: str = "svc") -> list[dict[str, Any]]:
        path = self.state_dir(service) / "objects.json"
        return json.loads(path.read_text()) if path.exists() else []

    def set_objects(self, objects: list[dict[str, Any]], service: str = "svc") -> None:
        path = self.state_dir(service)
        path.mkdir(parents=True, exist_ok=True)
        (path / "objects.json").write_text(json.dumps(objects))

    def bundle(self) -> Bundle:
        return load_bundle(self.root)

    def context(self, **overrides: Any) -> ExecContext:
        kwargs: dict[str, Any] = {
            "bundle_root": self.root,
            "module": self.module,
            "node_id": self.node_id,
            "data_dir": self.data_dir,
            "settings": self.settings,
        }
        kwargs.update(overrides)
        return ExecContext(**kwargs)

    def executor(
        self,
        service: str = "svc",
        *,
        timeouts: dict[str, float] | None = None,
        limits: ExecLimits | None = None,
        context: ExecContext | None = None,
    ) -> Executor:
        return Executor(
            ["bin/fake"],
            context or self.context(),
            service=service,
            timeouts=timeouts,
            limits=limits or ExecLimits(drain_grace_s=0.5, kill_grace_s=0.5),
        )

    def client(self, service: str = "svc", **kwargs: Any) -> ProtocolClient:
        return ProtocolClient(self.executor(service, **kwargs))

    def stop_everything(self) -> None:
        """Kill what the fake started (by recorded PID), for tests that leave things on purpose."""
        for pid in {*self.all_recorded_pids()}:
            try:
                proc = psutil.Process(pid)
                proc.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue

    def all_recorded_pids(self) -> list[int]:
        pids: list[int] = []
        for name in ("service-pids.txt", "grandchildren.txt"):
            for path in self.data_dir.rglob(name):
                pids.extend(int(x) for x in path.read_text().split())
        return pids


def write_fake_executable(path: Path) -> None:
    """Copy the fake module with a shebang pointing at this interpreter (``-S``: stdlib only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = FAKE_MODULE.read_text().split("\n", 1)[1]
    path.write_text(f"#!{sys.executable} -S\n{body}")
    path.chmod(0o755)


def make_bundle(
    base: Path,
    *,
    services: Iterable[dict[str, Any]] = (),
    probes: Iterable[dict[str, Any]] = (),
    config: dict[str, Any] | None = None,
    module: str = "fakemod",
) -> FakeBundle:
    root = base / "bundle"
    root.mkdir(parents=True, exist_ok=True)
    write_fake_executable(root / "bin" / "fake")
    manifest = {"name": module, "services": list(services), "probes": list(probes)}
    (root / "oarbank-module.json").write_text(json.dumps(manifest, indent=2))
    fake = FakeBundle(root, base / "data", module=module)
    fake.set_config(config or {})
    return fake


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, dirs_exist_ok=True)


# --------------------------------------------------------------------------- in-memory ops


class FakeOps:
    """An in-memory :class:`~oarbank_protocol.execution.client.ServiceOps` for fast state-machine tests.

    ``start_results`` is a queue of exceptions (or None for success) consumed per start;
    ``crash()`` makes the "process" die so the next status check sees running=false.
    """

    _next_pid = 40_000

    def __init__(self, name: str = "svc", node_id: str = NODE) -> None:
        self.name = name
        self.node_id = node_id
        self.calls: list[str] = []
        self.running = False
        self.pid: int | None = None
        self.health = "healthy"
        self.pools: dict[str, int] = {}
        self.mem_gb = 0.0
        self.start_results: list[BaseException | None] = []
        self.start_error: BaseException | None = None
        self.ready_polls_needed = 0
        self._ready_polls = 0
        self.stop_error: BaseException | None = None
        self.objects: dict[str, OwnedObject] = {}
        self.destroy_errors: dict[str, BaseException] = {}
        self.fingerprint_error: BaseException | None = None
        self.start_hook: Callable[[], Awaitable[None]] | None = None

    def count(self, op: str) -> int:
        return sum(1 for c in self.calls if c == op)

    def crash(self) -> None:
        self.running = False
        self.pid = None

    def add_object(
        self,
        object_id: str,
        attempt: str,
        *,
        node: str | None = None,
        service: str | None = None,
        labels: dict[str, str] | None = None,
        uid: int | None = None,
    ) -> None:
        if labels is None:
            labels = {
                LABEL_ATTEMPT: attempt,
                LABEL_NODE: node or self.node_id,
                LABEL_SERVICE: service or self.name,
            }
        self.objects[object_id] = OwnedObject(id=object_id, kind="c", labels=labels, uid=uid)

    async def fingerprint(self) -> Fingerprint:
        self.calls.append("fingerprint")
        if self.fingerprint_error is not None:
            raise self.fingerprint_error
        return Fingerprint.model_validate(
            {
                "health": self.health,
                "pools": self.pools,
                "reserve": {"mem_gb": self.mem_gb},
                "running": self.running,
                "pid": self.pid,
            }
        )

    async def start(self) -> OpResult:
        self.calls.append("start")
        if self.start_hook is not None:
            await self.start_hook()
        error = self.start_results.pop(0) if self.start_results else self.start_error
        if error is not None:
            raise error
        if not self.running:
            FakeOps._next_pid += 1
            self.pid = FakeOps._next_pid
        self.running = True
        self._ready_polls = 0
        return OpResult(changed=True)

    async def stop(self) -> OpResult:
        self.calls.append("stop")
        if self.stop_error is not None:
            raise self.stop_error
        was = self.running
        self.running = False
        self.pid = None
        return OpResult(changed=was)

    async def status(self) -> Status:
        self.calls.append("status")
        return Status(running=self.running, ready=self.running)

    async def ready(self) -> Status:
        self.calls.append("ready")
        self._ready_polls += 1
        ready = self.running and self._ready_polls > self.ready_polls_needed
        return Status(running=self.running, ready=ready)

    async def list_owned(self) -> OwnedList:
        self.calls.append("list_owned")
        return OwnedList(objects=list(self.objects.values()))

    async def destroy(self, object_id: str, *, force: bool = False) -> OpResult:
        self.calls.append("destroy")
        if object_id in self.destroy_errors:
            raise self.destroy_errors[object_id]
        existed = self.objects.pop(object_id, None) is not None
        return OpResult(changed=existed)


def op_failed(op: str = "start", code: int = 11, msg: str = "try again later") -> OpFailed:
    from oarbank_protocol.documents import ErrorDocument

    return OpFailed(
        op, 1, f"`{op}` failed with error {code}: {msg}", error=ErrorDocument(code=code, msg=msg)
    )


def exec_error(op: str = "start", reason: str = "boom") -> ExecError:
    return ExecError(op, reason)


def manager_for(fake: FakeBundle, **kwargs: Any) -> ModuleManager:
    """A ModuleManager over the fake bundle's real executables, with short drain graces."""
    kwargs.setdefault("limits", ExecLimits(drain_grace_s=0.5, kill_grace_s=0.5))
    return ModuleManager.for_bundle(fake.bundle(), fake.context(), **kwargs)


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


async def drive(
    clock: FakeClock, aw: Awaitable[Any], *, step: float = 0.05, timeout: float = 10.0
) -> Any:
    """Await ``aw`` while nudging fake time forward, so fake-clock polls (ready) can proceed."""
    task = asyncio.ensure_future(aw)
    deadline = time.monotonic() + timeout
    while not task.done():
        if time.monotonic() > deadline:
            task.cancel()
            raise TimeoutError("drive: awaitable did not finish")
        await clock.advance(step)
        await asyncio.sleep(0.01)
    return task.result()
