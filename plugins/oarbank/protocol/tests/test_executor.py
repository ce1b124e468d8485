"""The safe executor: exact environment, cwd, files, redaction, sync/async parity, cancellation."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from oarbank_protocol.documents import Fingerprint, Status
from oarbank_protocol.errors import OpFailed
from oarbank_protocol.execution.environment import ExecContext, check_extra_env
from oarbank_protocol.execution.executor import DEFAULT_TIMEOUTS, Executor
from oarbank_protocol.execution.redaction import Redactor, secret_values
from oarbank_testkit import FakeBundle, alive, service_entry, wait_until

SPEC_ENV = {
    "PATH",
    "LANG",
    "HOME",
    "TMPDIR",
    "OARBANK_MODULE_DATA",
    "OARBANK_MODULE",
    "OARBANK_SERVICE",
    "OARBANK_NODE_ID",
    "OARBANK_PLATFORM",
    "OARBANK_SETTINGS_FILE",
    "OARBANK_TOOLS_FILE",
    "OARBANK_LIMITS_FILE",
}


def test_default_timeouts_are_the_spec_table() -> None:
    assert DEFAULT_TIMEOUTS == {
        "fingerprint": 5,
        "start": 120,
        "stop": 120,
        "status": 5,
        "ready": 5,
        "list_owned": 5,
        "destroy": 60,
    }


def test_environment_is_exactly_the_spec_list(
    bundle_factory: Callable[..., FakeBundle], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SLURM_JOB_ID", "ETCD_ENDPOINTS", "NATS_URL", "DYN_NAMESPACE", "LD_PRELOAD"):
        monkeypatch.setenv(name, "leak" if name != "LD_PRELOAD" else "")
    fake = bundle_factory(services=[service_entry()])
    fake.settings = {"greeting": "grüße", "nested": {"n": 1}}
    executor = fake.executor(
        context=fake.context(tools={"docker": "/usr/bin/docker"}, limits={"cpus": 2})
    )
    executor.call_sync("fingerprint", Fingerprint)
    call = fake.calls("fingerprint")[-1]
    assert set(call["env_keys"]) == SPEC_ENV
    env = call["env"]
    data = fake.data_dir.resolve()
    assert env["HOME"] == str(data / "home")
    assert env["TMPDIR"] == str(data / "tmp")
    assert env["OARBANK_MODULE_DATA"] == str(data)
    assert env["OARBANK_SERVICE"] == "svc"
    assert env["OARBANK_NODE_ID"] == "node-1"
    assert env["OARBANK_MODULE"] == "fakemod"
    assert env["LANG"] == "C.UTF-8"
    assert call["cwd"] == str(fake.root)
    settings = Path(env["OARBANK_SETTINGS_FILE"]).read_bytes()
    assert json.loads(settings.decode("utf-8")) == {"greeting": "grüße", "nested": {"n": 1}}
    assert json.loads(Path(env["OARBANK_TOOLS_FILE"]).read_text()) == {"docker": "/usr/bin/docker"}
    assert json.loads(Path(env["OARBANK_LIMITS_FILE"]).read_text()) == {"cpus": 2}
    assert call["pgid"] == call["pid"], "each op runs in its own session / process group"


def test_extra_env_is_validated(tmp_path: Path) -> None:
    check_extra_env({"MY_VAR": "1"})
    for bad in (
        {"LD_PRELOAD": "x"},
        {"PYTHONPATH": "x"},
        {"A=B": "x"},
        {"PATH": "x"},
        {"OARBANK_NODE_ID": "x"},
        {"OK": "a\x00b"},
    ):
        with pytest.raises(ValueError):
            check_extra_env(bad)
    check_extra_env({"LD_LIBRARY_PATH": "/opt"}, allow_loader_vars=True)
    with pytest.raises(ValueError):
        ExecContext(bundle_root=tmp_path, module="../x", node_id="n", data_dir=tmp_path)


def test_V06_secrets_are_redacted_in_errors(bundle_factory: Callable[..., FakeBundle]) -> None:
    fake = bundle_factory(services=[service_entry()])
    fake.settings = {
        "registry": {"api_token": "tok-SECRET-123"},
        "password": "hunter22",
        "user": "bob",
    }
    fake.set_op(
        "start",
        exit_code=1,
        stderr="login failed for bob with hunter22\n",
        error_doc={
            "code": 5,
            "msg": "auth with tok-SECRET-123 failed",
            "details": {"pw": "hunter22"},
        },
    )
    with pytest.raises(OpFailed) as info:
        fake.executor().call_sync("start", Status)
    text = str(info.value)
    assert "tok-SECRET-123" not in text
    assert "hunter22" not in text
    assert "***" in text
    assert "bob" in text
    assert info.value.error is not None
    assert "hunter22" not in json.dumps(info.value.error.details)


def test_redactor_rules() -> None:
    assert secret_values({"db": {"password": "p4ssw0rd"}, "name": "x"}) == {"p4ssw0rd"}
    assert secret_values({"x": "value1"}, extra_keys=["X"]) == {"value1"}
    redact = Redactor(["abcd", "ab"])
    assert redact("abcd-ab") == "***-ab"  # too-short secrets are left alone
    assert not Redactor([])


def test_sync_and_async_apis_agree(bundle_factory: Callable[..., FakeBundle]) -> None:
    fake = bundle_factory(services=[service_entry()], config={"pools": {"slots": 3}})
    executor = fake.executor()
    sync_doc = executor.call_sync("fingerprint", Fingerprint).document
    async_doc = asyncio.run(executor.call("fingerprint", Fingerprint)).document
    assert sync_doc == async_doc
    assert sync_doc.pools == {"slots": 3}


def test_concurrent_calls_for_different_services(bundle_factory: Callable[..., FakeBundle]) -> None:
    fake = bundle_factory(services=[service_entry()], config={"ops": {"status": {"sleep_s": 0.3}}})

    async def main() -> float:
        executors = [fake.executor(f"svc{i}") for i in range(10)]
        threads_before = threading.active_count()
        began = time.monotonic()
        calls = asyncio.gather(*(e.call("status", Status) for e in executors))
        await asyncio.sleep(0.1)
        assert threading.active_count() == threads_before, "a thread per call"
        results = await calls
        assert all(not r.document.running for r in results)
        return time.monotonic() - began

    elapsed = asyncio.run(main())
    assert elapsed < 2.5, f"10 x 0.3 s ops took {elapsed:.2f} s: not concurrent"


def test_cancelling_a_call_kills_the_op(bundle_factory: Callable[..., FakeBundle]) -> None:
    fake = bundle_factory(services=[service_entry()], config={"ops": {"status": {"sleep_s": 30}}})
    executor = fake.executor()

    async def main() -> None:
        task = asyncio.ensure_future(executor.call("status", Status))
        assert await asyncio.to_thread(wait_until, lambda: bool(fake.calls("status")), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    pid = fake.calls("status")[0]["pid"]
    assert wait_until(lambda: not alive(pid), 3)


def test_bare_command_names_are_looked_up_on_path(tmp_path: Path) -> None:
    context = ExecContext(bundle_root=tmp_path, module="m", node_id="n", data_dir=tmp_path / "d")
    executor = Executor(
        ["sh", "-c", 'echo \'{"running": false, "ready": false}\'', "x"], context, service="s"
    )
    assert executor.call_sync("status", Status).document.ready is False


def test_a_finished_descriptor_stays_open_until_the_driver_unregistered_it() -> None:
    """Ops start and end on one loop all the time, so a closed descriptor number is reused
    at once. An op that closed its pipe on EOF while the loop still had it registered left
    a stale registration: the next op's pipe, given the same number, was never watched by
    the kernel, and that op heard nothing until its timeout (in CI a destroy hung for the
    whole 30 s reaping budget). Closing now waits for ``release``, after unregistering."""
    import os
    import subprocess

    from oarbank_protocol.execution.executor import ExecLimits, _OpRun

    proc = subprocess.Popen(
        ["true"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    run = _OpRun(proc, 5.0, ExecLimits(), 1024)
    proc.wait()
    out_fd = run.out_fd
    run.on_readable(out_fd)  # EOF
    assert out_fd not in run.watched(), "a finished pipe is no longer watched"
    os.fstat(out_fd)  # ...but still open: its number cannot be handed to another op yet
    run.poll(time.monotonic())  # notices the exit
    assert run.pidfd is not None and run.pidfd not in run.watched()
    os.fstat(run.pidfd)
    pidfd = run.pidfd
    run.release()
    with pytest.raises(OSError):
        os.fstat(out_fd)
    with pytest.raises(OSError):
        os.fstat(pidfd)
    run.close()


def test_many_overlapping_calls_on_one_loop_all_finish(
    bundle_factory: Callable[..., FakeBundle],
) -> None:
    """Ops end and start on the same loop all the time, so descriptor numbers are reused at
    once. An op that closed its pipes before unregistering them used to unregister the next
    op's pipe (same number) instead: that op heard nothing until its timeout (CI: a destroy
    hung for the whole 30 s reaping budget)."""
    fake = bundle_factory(services=[service_entry()])

    async def main() -> list[float]:
        executor = fake.executor()
        gate = asyncio.Semaphore(6)

        async def one() -> float:
            async with gate:
                began = time.monotonic()
                await executor.call("status", Status, timeout_s=20)
                return time.monotonic() - began

        return await asyncio.gather(*(one() for _ in range(90)))

    durations = asyncio.run(main())
    assert max(durations) < 10, f"an op waited {max(durations):.1f} s for events it missed"
