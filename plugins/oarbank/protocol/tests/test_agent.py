"""The foreground agent (``python -m oarbank_protocol.agent``): adoption across SIGKILLs (F22-F25),
teardown on SIGTERM, exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from oarbank_protocol.documents import LABEL_ATTEMPT, LABEL_NODE, LABEL_SERVICE
from oarbank_testkit import (
    NODE,
    SRC_DIR,
    FakeBundle,
    ProcessTracker,
    alive,
    service_entry,
    wait_until,
)

pytestmark = pytest.mark.timeout(90)

BundleFactory = Callable[..., FakeBundle]


class Agent:
    """One agent process plus the files it writes."""

    def __init__(self, fake: FakeBundle, procs: ProcessTracker, *extra: str) -> None:
        self.fake = fake
        self.procs = procs
        self.dir = fake.data_dir.parent / "agent"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state = self.dir / "state.json"
        self.status = self.dir / "status.json"
        self.extra = list(extra)
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def argv(self, *more: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "oarbank_protocol.agent",
            "--bundle",
            str(self.fake.root),
            "--service",
            "svc",
            "--node-id",
            NODE,
            "--data",
            str(self.fake.data_dir),
            "--state",
            str(self.state),
            "--status-file",
            str(self.status),
            *self.extra,
            *more,
        ]

    def env(self) -> dict[str, str]:
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SRC_DIR)}

    def start(self, *more: str) -> subprocess.Popen[bytes]:
        self.runs += 1
        log = open(self.dir / f"agent-{self.runs}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(self.argv(*more), env=self.env(), stdout=log, stderr=log)
        log.close()
        self.procs.add(self.proc.pid)
        return self.proc

    def run(self, *more: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            self.argv(*more),
            env=self.env(),
            capture_output=True,
            check=False,
            text=True,
            timeout=timeout,
        )
        return done

    def log(self, run: int | None = None) -> str:
        return (self.dir / f"agent-{run or self.runs}.log").read_text(errors="replace")

    def read_status(self) -> dict[str, Any]:
        try:
            value: dict[str, Any] = json.loads(self.status.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return value

    def wait_ready(self, timeout: float = 15) -> dict[str, Any]:
        assert self.proc is not None
        pid = self.proc.pid

        def ready() -> bool:
            status = self.read_status()
            return bool(status.get("ready")) and status.get("agent_pid") == pid

        assert wait_until(ready, timeout), f"agent never ready:\n{self.log()}"
        return self.read_status()

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()

    def terminate(self, timeout: float = 20) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def state_doc(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.state.read_text())
        return value

    def write_state(self, doc: dict[str, Any]) -> None:
        self.state.write_text(json.dumps(doc))


def always_bundle(factory: BundleFactory, **config: Any) -> FakeBundle:
    return factory(services=[service_entry(lifecycle="always", status_period_s=0.3)], config=config)


def test_F22_sigkill_loop_adopts_and_never_duplicates(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory)
    agent = Agent(fake, procs)
    agent.start()
    first = agent.wait_ready()
    service_pid = first["pid"]
    assert service_pid == fake.service_pid()
    for round_ in range(5):
        agent.kill9()
        assert alive(service_pid), "the service died with the agent"
        agent.start()
        status = agent.wait_ready()
        assert status["pid"] == service_pid, f"round {round_}: service PID changed"
        assert status["restart_count"] == first["restart_count"] == 0
        assert status["adopted"] is True
        assert status["state"] == "ready"
    assert fake.service_pids() == [service_pid], "a second instance was started"
    assert len(fake.calls("start")) == 1
    assert agent.terminate() == 0
    assert not alive(service_pid)
    assert agent.state_doc()["services"]["svc"]["state"] == "stopped"


def test_F23_pid_reuse_is_refused_and_never_signalled(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory)
    agent = Agent(fake, procs)
    agent.start()
    service_pid = agent.wait_ready()["pid"]
    agent.kill9()
    doc = agent.state_doc()
    record = doc["services"]["svc"]
    assert record["pid"] == service_pid
    assert record["pid_start_ticks"]
    record["pid_start_ticks"] -= 100_000  # the recorded process "was started" long ago
    agent.write_state(doc)
    agent.start()
    status = agent.wait_ready()
    log = agent.log()
    assert "not adopting it and not signalling it" in log
    assert "lost" in log
    assert status["restart_count"] == 1, "lost must be restarted per policy"
    assert fake.signals() == [], "the agent signalled a process it did not own"
    assert alive(service_pid)
    assert len(fake.calls("start")) == 2
    assert agent.terminate() == 0


CORRUPTIONS = ("empty", "invalid_json", "truncated", "unknown_version")


def test_F24_corrupt_state_rediscovers_without_duplicates(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory)
    agent = Agent(fake, procs)
    agent.start()
    service_pid = agent.wait_ready()["pid"]
    for corruption in CORRUPTIONS:
        agent.kill9()
        text = agent.state.read_text()
        corrupted = {
            "empty": "",
            "invalid_json": "{not json",
            "truncated": text[: len(text) // 2],
            "unknown_version": json.dumps({**json.loads(text), "version": 99}),
        }[corruption]
        agent.state.write_text(corrupted)
        aside = agent.state.with_name("state.json.corrupt")
        aside.unlink(missing_ok=True)
        lists_before = len(fake.calls("list_owned"))
        agent.start()
        status = agent.wait_ready()
        assert status["pid"] == service_pid, corruption
        assert status["adopted"] is True, corruption
        assert len(fake.calls("start")) == 1, f"{corruption}: a duplicate was started"
        assert len(fake.calls("list_owned")) > lists_before, f"{corruption}: no rediscovery"
        assert aside.read_text() == corrupted, f"{corruption}: not moved aside"
        assert "rediscovering" in agent.log()
    assert agent.terminate() == 0


def test_F25_reboot_drops_pids_and_reaps_owned_objects(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory)
    live_file = fake.data_dir.parent / "live.json"
    live_file.write_text(json.dumps({"live": ["still-running"]}))
    agent = Agent(fake, procs, "--live-attempts", str(live_file))
    agent.start()
    service_pid = agent.wait_ready()["pid"]
    agent.kill9()
    labels = {LABEL_NODE: NODE, LABEL_SERVICE: "svc"}
    fake.set_objects(
        [
            {"id": "old-1", "kind": "c", "labels": {**labels, LABEL_ATTEMPT: "before-reboot"}},
            {"id": "keep-1", "kind": "c", "labels": {**labels, LABEL_ATTEMPT: "still-running"}},
        ]
    )
    doc = agent.state_doc()
    doc["boot_id"] = "00000000-0000-0000-0000-000000000000"
    agent.write_state(doc)
    agent.start()
    agent.wait_ready()
    assert [o["id"] for o in fake.objects()] == ["keep-1"]
    assert [c["argv"] for c in fake.calls("destroy")] == [["destroy", "old-1"]]
    assert fake.signals() == []
    assert agent.state_doc()["boot_id"] != doc["boot_id"]
    assert agent.terminate() == 0
    assert not alive(service_pid)


def test_sigterm_stops_the_service_and_reaps(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory, start_creates=[{"id": "ctr-1", "attempt_id": "job-1"}])
    agent = Agent(fake, procs)
    agent.start()
    service_pid = agent.wait_ready()["pid"]
    assert [o["id"] for o in fake.objects()] == ["ctr-1"]
    assert agent.terminate() == 0
    assert not alive(service_pid)
    assert fake.objects() == [], "teardown did not reap the service's objects"
    assert agent.read_status()["state"] == "stopped"
    assert fake.signals() == [f"{service_pid} SIGTERM"]


def test_once_mode_and_lock_and_exit_codes(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory)
    agent = Agent(fake, procs)
    done = agent.run("--once")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ready"] is True
    assert report["adopted"] is False
    pid = fake.service_pid()
    assert pid is not None
    assert pid == report["pid"]
    again = json.loads(agent.run("--once").stdout)
    assert again["pid"] == pid
    assert again["adopted"] is True
    agent.start()
    agent.wait_ready()
    locked = agent.run()
    assert locked.returncode == 4
    assert "in use by another agent" in locked.stderr
    assert agent.terminate() == 0
    assert not alive(pid)


def test_unhealthy_service_makes_the_agent_exit_3(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory, ops={"start": {"exit_code": 1}})
    agent = Agent(fake, procs)
    agent.start()
    assert agent.proc is not None
    assert agent.proc.wait(30) == 3
    assert len(fake.calls("start")) == 3
    assert "3 failures within" in agent.log()


def test_usage_error_for_unknown_service(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory)
    agent = Agent(fake, procs)
    argv = agent.argv()
    argv[argv.index("svc")] = "nope"
    done = subprocess.run(
        argv, env=agent.env(), capture_output=True, check=False, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "has no service 'nope'" in done.stderr
    argv[argv.index(str(fake.root))] = str(fake.root / "missing")
    done = subprocess.run(
        argv, env=agent.env(), capture_output=True, check=False, text=True, timeout=30
    )
    assert done.returncode == 2
    assert "does not exist" in done.stderr


# --------------------------------------------------------------------------- honest exits


def objects_bundle(factory: BundleFactory, **config: Any) -> FakeBundle:
    return always_bundle(
        factory, start_creates=[{"id": "ctr-1", "attempt_id": "job-1", "busy": True}], **config
    )


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"destroy_fails": True}, "owned objects left on this node: ctr-1"),
        ({"broken": ["destroy_lies"]}, "owned objects left on this node: ctr-1"),
        ({"broken": ["busy_after_stop"]}, "still busy after stop"),
    ],
    ids=["destroy-fails", "destroy-lies", "busy-after-stop"],
)
def test_L07_teardown_that_leaves_owned_objects_exits_1(
    bundle_factory: BundleFactory, procs: ProcessTracker, config: dict[str, Any], said: str
) -> None:
    fake = objects_bundle(bundle_factory, **config)
    agent = Agent(fake, procs)
    agent.start()
    service_pid = agent.wait_ready()["pid"]
    assert agent.terminate() == 1, agent.log()
    assert not alive(service_pid)
    assert said in agent.log()
    if "busy_after_stop" not in config.get("broken", []):
        assert agent.read_status()["leftover_ids"] == ["ctr-1"]


def test_P11_stop_that_claims_success_while_running_exits_1(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory, broken=["stop_lies"])
    agent = Agent(fake, procs)
    agent.start()
    service_pid = agent.wait_ready()["pid"]
    try:
        assert agent.terminate() == 1, agent.log()
        log = agent.log()
        assert "stop exited 0 but status still says running" in log
        assert "protocol_violation" in log
        assert alive(service_pid), "nothing the agent may do stops it: it must say so"
    finally:
        fake.stop_everything()


def test_P03_first_fingerprint_failure_and_malformed_documents_are_logged(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(
        bundle_factory, ops={"fingerprint": {"stdout": "literal", "stdout_literal": "oops {"}}
    )
    agent = Agent(fake, procs)
    agent.start()
    assert wait_until(lambda: "not starting it until" in agent.read_status().get("reason", ""))
    status = agent.read_status()
    assert status["state"] == "stopped"
    assert "fingerprint" in status["reason"] and "malformed" in status["reason"]
    assert agent.terminate() == 0
    log = agent.log()
    assert "fingerprint_failed" in log
    assert "svc fingerprint: malformed document (exit status 0)" in log
    assert "output starts with: 'oops {'" in log
    assert fake.calls("start") == [], "started without knowing whether it already ran"


def test_P08_ready_without_running_is_a_violation_not_ready(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory, lie=True, broken=["ready_without_running"])
    agent = Agent(fake, procs)
    agent.start()
    assert agent.proc is not None
    assert agent.proc.wait(60) == 3, agent.log()
    log = agent.log()
    assert "ready said ready=true with running=false" in log
    assert log.count("ready said ready=true with running=false") == 3, "once per start"
    assert "start reported success but the service is not running" in log


@pytest.mark.parametrize("mode", [(), ("--once",)], ids=["serve", "once"])
def test_unsupported_platform_exits_5_at_once(
    bundle_factory: BundleFactory, procs: ProcessTracker, mode: tuple[str, ...]
) -> None:
    fake = bundle_factory(services=[service_entry(platforms=["darwin-aarch64"])])
    done = Agent(fake, procs).run(*mode, timeout=20)
    assert done.returncode == 5, done.stderr
    assert "does not run on platform" in done.stderr
    assert fake.calls() == [], "an executable ran on a platform the manifest excludes"


def test_once_obeys_the_first_sigterm_and_stops_what_it_started(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory, ready_after_s=60)
    fake_entry = json.loads((fake.root / "oarbank-module.json").read_text())
    fake_entry["services"][0]["ready_timeout_s"] = 120
    (fake.root / "oarbank-module.json").write_text(json.dumps(fake_entry))
    agent = Agent(fake, procs)
    proc = agent.start("--once")
    assert wait_until(lambda: fake.service_pid() is not None, 15), agent.log()
    service_pid = fake.service_pid()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 128 + signal.SIGTERM, agent.log()
    assert service_pid is not None and not alive(service_pid)
    assert fake.calls("stop")


def test_sigterm_while_recovering_starts_nothing(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = always_bundle(bundle_factory, ops={"fingerprint": {"sleep_s": 1.5}})
    agent = Agent(fake, procs)
    proc = agent.start()
    assert wait_until(lambda: bool(fake.calls("fingerprint")), 15)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0, agent.log()
    assert fake.calls("start") == []
