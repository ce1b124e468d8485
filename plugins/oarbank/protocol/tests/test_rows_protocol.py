"""Fault matrix rows P01-P12: protocol executables misbehaving."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from oarbank_protocol.documents import Fingerprint, OpResult, OwnedList, Status
from oarbank_protocol.errors import (
    BadInterpreter,
    CapabilityUnavailable,
    ExecutableIsDirectory,
    ExecutableMissing,
    InvalidDocument,
    MalformedResponse,
    NotExecutable,
    OpFailed,
    OpTimeout,
    OutputTooLarge,
    ServiceStartFailed,
    TextFileBusy,
)
from oarbank_protocol.execution.environment import ExecContext
from oarbank_protocol.execution.executor import ExecLimits, Executor
from oarbank_protocol.lifecycle.clock import FakeClock
from oarbank_protocol.lifecycle.manager import AdmissionRequest
from oarbank_protocol.lifecycle.supervisor import ServiceState
from oarbank_testkit import (
    FakeBundle,
    ProcessTracker,
    advance_until,
    alive,
    async_wait_until,
    manager_for,
    run,
    service_entry,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)

BundleFactory = Callable[..., FakeBundle]


def grandchildren(fake: FakeBundle, service: str = "svc") -> list[int]:
    path = fake.state_dir(service) / "grandchildren.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


# --------------------------------------------------------------------------- P01


def test_P01_fingerprint_hang_is_killed_and_blocks_no_one(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(
        services=[service_entry("hang", timeouts={"fingerprint": 1.0}), service_entry("quick")],
        config={"services": {"hang": {"ops": {"fingerprint": {"sleep_s": 60}}}}},
    )

    async def main() -> None:
        manager = manager_for(fake)
        began = time.monotonic()
        await manager.start()
        elapsed = time.monotonic() - began
        try:
            hang = manager.services["hang"]
            assert hang.health == "error"
            assert "timed out after 1 s" in hang.health_detail
            assert manager.capabilities() == {"hang": False, "quick": True}
            assert 0.9 <= elapsed < 3.0
            quick_end = fake.calls("fingerprint", "quick", event="end")[0]["mono"]
            hang_begin = fake.calls("fingerprint", "hang")[0]["mono"]
            assert quick_end - hang_begin < 0.8, "quick's fingerprint waited for the hanging one"
            with pytest.raises(CapabilityUnavailable, match="hang"):
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"hang"})))
        finally:
            await manager.shutdown()

    run(main())
    hung_pid = fake.calls("fingerprint", "hang")[0]["pid"]
    assert not alive(hung_pid), "the hanging fingerprint's process group was not killed"


# --------------------------------------------------------------------------- P02


@pytest.mark.parametrize(
    ("knob", "driver"), [("fork_grandchild_holding_stdout", "sync"), ("daemonize", "async")]
)
def test_P02_start_hang_with_grandchild_holding_stdout(
    bundle_factory: BundleFactory, knob: str, driver: str
) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("start", **{knob: True, "sleep_s": 60, "grandchild_sleep_s": 60})
    executor = fake.executor(timeouts={"start": 1.0})
    began = time.monotonic()
    with pytest.raises(OpTimeout, match="timed out after 1 s"):
        if driver == "sync":
            executor.call_sync("start", OpResult)
        else:
            run(executor.call("start", OpResult))
    assert time.monotonic() - began < 3.0, "drain after the kill was not bounded"
    pids = grandchildren(fake)
    assert pids, "the fake did not fork its grandchild"
    assert wait_until(lambda: not any(alive(p) for p in pids), 3), "grandchild survived"


def test_P02_exit_while_stdout_still_held_returns_after_drain_grace(
    bundle_factory: BundleFactory, caplog: pytest.LogCaptureFixture
) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("status", daemonize=True, grandchild_sleep_s=30)
    executor = fake.executor()
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        result = executor.run_raw_sync("status")
    assert result.exit_code == 0
    assert result.pipe_held
    assert time.monotonic() - began < 2.0
    assert executor.interpret(result, Status).document.running is False
    assert "kept stdout/stderr open" in caplog.text
    fake.stop_everything()


# --------------------------------------------------------------------------- P03


@pytest.mark.parametrize(
    ("mode", "problem"),
    [
        ("garbage", "not JSON"),
        ("two_docs", "more than one JSON document"),
        ("trailing_text", "more than one JSON document or trailing text"),
        ("invalid_utf8", "not valid UTF-8"),
        ("array", "got an array"),
        ("null", "got null"),
        ("empty", "empty output"),
    ],
)
def test_P03_garbage_output_is_a_malformed_response(
    bundle_factory: BundleFactory, mode: str, problem: str
) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("fingerprint", stdout=mode)
    result = fake.executor().run_raw_sync("fingerprint")
    assert result.exit_code == 0, "exit 0 must not rescue a malformed document"
    with pytest.raises(MalformedResponse) as info:
        fake.executor().interpret(result, Fingerprint)
    assert problem in str(info.value)
    assert len(info.value.excerpt) < 300
    assert type(info.value) is MalformedResponse


# --------------------------------------------------------------------------- P04


def test_P04_error_document_retryable_is_retried_with_backoff(
    bundle_factory: BundleFactory,
) -> None:
    fake = bundle_factory(
        services=[
            service_entry(restart={"backoff_initial_s": 10, "backoff_max_s": 20, "max_failures": 5})
        ]
    )
    fake.set_op(
        "start", exit_code=1, error_doc={"code": 11, "msg": "try again later", "details": "busy"}
    )

    async def main() -> None:
        clock = FakeClock()
        manager = manager_for(fake, clock=clock)
        await manager.start()
        sup = manager.services["svc"]
        admit = asyncio.ensure_future(
            manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})))
        )
        try:
            assert await async_wait_until(lambda: sup.state == ServiceState.BACKOFF)
            assert "error 11: try again later (busy)" in sup.reason
            assert len(fake.calls("start")) == 1
            await clock.advance(5)  # well inside the 10 s +- 25 % backoff
            await asyncio.sleep(0.3)
            assert len(fake.calls("start")) == 1, "restarted before the backoff expired"
            fake.set_op("start")
            # Stop moving fake time as soon as the retry happened: on a loaded machine a
            # big step could otherwise run past the next status period and count a third start.
            assert await advance_until(clock, lambda: len(fake.calls("start")) >= 2, step=0.5)
            assert await advance_until(clock, admit.done, step=0.05)
            admission = admit.result()
            assert admission.services == ("svc",)
            assert len(fake.calls("start")) == 2
            assert sup.restart_count == 1
            manager.release("a1")
        finally:
            admit.cancel()
            await manager.shutdown()

    run(main())


def test_P04_non_retryable_error_is_not_retried(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("start", exit_code=1, error_doc={"code": 7, "msg": "invalid config: no image"})

    async def main() -> None:
        clock = FakeClock()
        manager = manager_for(fake, clock=clock)
        await manager.start()
        try:
            with pytest.raises(ServiceStartFailed) as info:
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})))
            assert "error 7: invalid config: no image" in str(info.value)
            assert "not retryable" in str(info.value)
            await clock.advance(1000)
            await asyncio.sleep(0.2)
            assert len(fake.calls("start")) == 1
            assert manager.services["svc"].state == ServiceState.UNHEALTHY
            assert manager.resources.snapshot().charges == {}
        finally:
            await manager.shutdown()

    run(main())


def test_P04_error_fields_are_surfaced(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op(
        "start", exit_code=2, error_doc={"code": 11, "msg": "later", "details": {"wait_s": 3}}
    )
    with pytest.raises(OpFailed) as info:
        fake.executor().call_sync("start", OpResult)
    error = info.value.error
    assert error is not None
    assert (error.code, error.msg, error.details) == (11, "later", {"wait_s": 3})
    assert info.value.exit_code == 2
    assert info.value.retryable
    assert info.value.code == 11


# --------------------------------------------------------------------------- P05


def test_P05_nonzero_exit_without_output_uses_cni_wording(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("start", exit_code=3, stdout="empty")
    with pytest.raises(OpFailed) as info:
        fake.executor().call_sync("start", OpResult)
    assert str(info.value) == "`start` failed with no error message: exit status 3"
    assert info.value.error is None
    assert info.value.exit_code == 3
    fake.set_op("start", exit_code=3, stdout="empty", stderr="disk full\n")
    with pytest.raises(OpFailed) as info:
        fake.executor().call_sync("start", OpResult)
    assert str(info.value).startswith("`start` failed with no error message: exit status 3")
    assert info.value.stderr_tail == "disk full\n"
    assert "disk full" in str(info.value)


# --------------------------------------------------------------------------- P06


def test_P06_huge_stdout_is_capped_and_the_child_killed(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("fingerprint", stdout="huge", stdout_bytes=100 * 1024 * 1024)
    rss_before = psutil.Process().memory_info().rss
    began = time.monotonic()
    with pytest.raises(OutputTooLarge, match="output too large") as info:
        fake.executor().call_sync("fingerprint", Fingerprint)
    assert time.monotonic() - began < 5.0
    assert info.value.cap == 1024 * 1024
    assert psutil.Process().memory_info().rss - rss_before < 40 * 1024 * 1024
    pid = fake.calls("fingerprint")[0]["pid"]
    assert wait_until(lambda: not alive(pid), 3)


def test_P06_endless_stderr_keeps_a_bounded_tail(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("status", stderr="endless")
    with pytest.raises(OpTimeout) as info:
        fake.executor(timeouts={"status": 1.0}).call_sync("status", Status)
    tail = info.value.stderr_tail
    assert 0 < len(tail.encode()) <= 64 * 1024
    assert "endless stderr noise" in tail


# --------------------------------------------------------------------------- P07


def _context(root: Path) -> ExecContext:
    return ExecContext(bundle_root=root, module="m", node_id="n", data_dir=root / "data")


def test_P07_unrunnable_executables_have_distinct_errors(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("#!/bin/sh\necho {}\n")
    (tmp_path / "plain").chmod(0o644)
    (tmp_path / "badshebang").write_text("#!/nonexistent/interpreter\n")
    (tmp_path / "badshebang").chmod(0o755)
    (tmp_path / "noshebang").write_text("echo hello\n")
    (tmp_path / "noshebang").chmod(0o755)
    (tmp_path / "adir").mkdir()
    cases = {
        "./plain": NotExecutable,
        "./missing": ExecutableMissing,
        "./badshebang": BadInterpreter,
        "./noshebang": BadInterpreter,
        "./adir": ExecutableIsDirectory,
        "no-such-command-xyz": ExecutableMissing,
    }
    for path, error in cases.items():
        executor = Executor([path], _context(tmp_path), service="s")
        with pytest.raises(error) as info:
            executor.call_sync("fingerprint", Fingerprint)
        assert type(info.value) is error, path
        assert not info.value.retryable
    with pytest.raises(BadInterpreter, match="exec format error"):
        Executor(["./noshebang"], _context(tmp_path), service="s").call_sync(
            "fingerprint", Fingerprint
        )


def test_P07_text_file_busy_is_retried(tmp_path: Path) -> None:
    script = tmp_path / "svc"
    script.write_text('#!/bin/sh\necho \'{"running": false, "ready": false}\'\n')
    script.chmod(0o755)
    limits = ExecLimits(etxtbsy_retries=5, etxtbsy_delay_s=0.1)
    executor = Executor(["./svc"], _context(tmp_path), service="s", limits=limits)
    fd = os.open(script, os.O_WRONLY)
    timer = threading.Timer(0.25, os.close, args=(fd,))
    timer.start()
    try:
        assert executor.call_sync("status", Status).document.running is False
    finally:
        timer.join()
    fd = os.open(script, os.O_WRONLY)
    try:
        with pytest.raises(TextFileBusy):
            executor.call_sync("status", Status)
    finally:
        os.close(fd)


def test_P07_manager_reports_undetected_and_withdraws(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry(lifecycle="always")])
    (fake.root / "bin" / "fake").chmod(0o644)

    async def main() -> None:
        manager = manager_for(fake)
        await manager.start()
        try:
            sup = manager.services["svc"]
            assert sup.health == "undetected"
            assert sup.state == ServiceState.UNHEALTHY
            assert manager.capabilities() == {"svc": False}
            with pytest.raises(CapabilityUnavailable, match="not executable"):
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})))
        finally:
            await manager.shutdown()

    run(main())
    assert fake.calls() == []


# --------------------------------------------------------------------------- P08


def test_P08_lying_start_fails_fast_instead_of_waiting_forever(
    bundle_factory: BundleFactory,
) -> None:
    fake = bundle_factory(
        services=[
            service_entry(
                restart={"backoff_initial_s": 0.1, "backoff_max_s": 0.1, "max_failures": 1}
            )
        ],
        config={"lie": True},
    )

    async def main() -> None:
        manager = manager_for(fake)
        await manager.start()
        try:
            began = time.monotonic()
            with pytest.raises(ServiceStartFailed, match="not running"):
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})))
            assert time.monotonic() - began < 3.0
        finally:
            await manager.shutdown()

    run(main())
    assert len(fake.calls("start")) == 1
    assert len(fake.calls("ready")) >= 3, "gave up before the not-running grace"


def test_P08_never_ready_hits_the_readiness_timeout(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(
        services=[
            service_entry(
                ready_timeout_s=0.6,
                restart={"backoff_initial_s": 0.1, "backoff_max_s": 0.1, "max_failures": 1},
            )
        ],
        config={"ready_after_s": 1000},
    )

    async def main() -> None:
        manager = manager_for(fake)
        await manager.start()
        try:
            with pytest.raises(ServiceStartFailed, match=r"readiness timeout after 0\.6 s"):
                await manager.admit(AdmissionRequest("a1", needs=frozenset({"svc"})))
        finally:
            await manager.shutdown()

    run(main())
    assert len(fake.calls("stop")) >= 1, "the half-started service was not stopped"


# --------------------------------------------------------------------------- P09


def test_P09_every_op_is_idempotent(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(
        services=[service_entry()],
        config={"start_creates": [{"id": "vm-1", "busy": True}, {"id": "vol-1"}]},
    )
    client = fake.client()

    async def main() -> None:
        first = await client.start()
        assert first.changed is True
        assert first.created == ["vm-1", "vol-1"]
        for _ in range(3):
            again = await client.start()
            assert again.changed is False
            assert again.pid == first.pid
        assert len(fake.service_pids()) == 1
        for _ in range(3):
            assert (await client.destroy("no-such-object")).changed is False
        assert (await client.destroy("vol-1")).changed is True
        for _ in range(3):
            assert (await client.destroy("vol-1")).changed is False
        listed = await client.list_owned()
        assert [o.id for o in listed.objects] == ["vm-1"]
        with pytest.raises(OpFailed) as info:
            await client.destroy("vm-1")
        assert info.value.code == 12
        assert [o.id for o in (await client.list_owned()).objects] == ["vm-1"]
        assert (await client.destroy("vm-1", force=True)).changed is True
        assert (await client.list_owned()).objects == []
        assert (await client.stop()).changed is True
        for _ in range(3):
            assert (await client.stop()).changed is False

    run(main())


# --------------------------------------------------------------------------- P10


def test_P10_concurrent_admissions_start_once(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()], config={"ops": {"start": {"sleep_s": 0.3}}})

    async def main() -> None:
        manager = manager_for(fake)
        await manager.start()
        try:
            await asyncio.gather(
                *(
                    manager.admit(AdmissionRequest(f"a{i}", needs=frozenset({"svc"})))
                    for i in range(3)
                )
            )
            snap = manager.services["svc"].snapshot()
            assert snap.users == ("a0", "a1", "a2")
            assert snap.state == "ready"
            assert len(fake.calls("start")) == 1
            assert len(fake.service_pids()) == 1
            for i in range(3):
                manager.release(f"a{i}")
        finally:
            await manager.shutdown()

    run(main())


# --------------------------------------------------------------------------- P11


@pytest.mark.parametrize("destroy_works", [True, False])
def test_P11_hanging_stop_escalates_to_destroy_force(
    bundle_factory: BundleFactory, procs: ProcessTracker, destroy_works: bool
) -> None:
    fake = bundle_factory(
        services=[service_entry(lifecycle="always", timeouts={"stop": 1.0})],
        config={
            "start_creates": [{"id": "vm-1", "kills_service": True}],
            "ops": {"stop": {"sleep_s": 30}},
            "destroy_fails": not destroy_works,
        },
    )

    async def main() -> None:
        manager = manager_for(fake)
        await manager.start()
        sup = manager.services["svc"]
        assert await sup.wait_state(ServiceState.READY, timeout_s=5)
        began = time.monotonic()
        await manager.shutdown(reap=False)
        assert time.monotonic() - began < 5.0, "teardown budget not respected"
        kinds = manager.events.kinds("svc")
        assert "stop_escalated" in kinds
        if destroy_works:
            assert sup.state == ServiceState.STOPPED
            assert "escalated" in sup.reason
        else:
            assert sup.state == ServiceState.UNHEALTHY
            assert sup.snapshot().leftover_ids == ("vm-1",)
            assert "vm-1" in sup.reason

    run(main())
    stop_pid = fake.calls("stop")[0]["pid"]
    assert wait_until(lambda: not alive(stop_pid), 3), "the hung stop was not killed"
    force = [c for c in fake.calls("destroy") if "--force" in c["argv"]]
    assert [c["argv"] for c in force] == [["destroy", "vm-1", "--force"]]
    if not destroy_works:
        fake.stop_everything()


# --------------------------------------------------------------------------- P12


def test_P12_wrong_types_name_the_field(bundle_factory: BundleFactory) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("fingerprint", override_fields={"running": "yes", "pools": {"slots": 1.5}})
    with pytest.raises(InvalidDocument) as info:
        fake.executor().call_sync("fingerprint", Fingerprint)
    assert set(info.value.fields) == {"running", "pools.slots"}
    assert "running" in str(info.value)
    assert "pools.slots" in str(info.value)
    assert not info.value.retryable


def test_P12_unknown_fields_are_ignored_and_logged(
    bundle_factory: BundleFactory, caplog: pytest.LogCaptureFixture
) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.set_op("list_owned", extra_fields={"next_page_token": "abc", "v2_feature": {"x": 1}})
    executor = fake.executor()
    with caplog.at_level(logging.WARNING, logger="oarbank_protocol.execution.executor"):
        parsed = executor.call_sync("list_owned", OwnedList)
        executor.call_sync("list_owned", OwnedList)
    assert parsed.document.objects == []
    assert parsed.unknown_fields == ("next_page_token", "v2_feature")
    warnings = [r for r in caplog.records if "unknown fields" in r.getMessage()]
    assert len(warnings) == 1, "the same unknown fields should be logged once, not per call"
