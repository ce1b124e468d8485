"""Small pure pieces: state store, resources, thresholds, fake clock, names, platforms,
liveness sources, bundle loading."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oarbank_protocol.errors import ManifestError, MemoryExhausted, PoolExhausted, StateLocked
from oarbank_protocol.execution.bundle import load_bundle
from oarbank_protocol.lifecycle.clock import FakeClock, wait_event
from oarbank_protocol.lifecycle.reaper import LivenessUnknown, file_liveness
from oarbank_protocol.lifecycle.resources import NodeResources
from oarbank_protocol.lifecycle.state_store import StateStore
from oarbank_protocol.lifecycle.thresholds import HealthFilter
from oarbank_protocol.names import check_name, check_object_id, is_object_id
from oarbank_protocol.platforms import current_platform, platform_matches
from oarbank_testkit import run


def test_state_store_round_trip_and_lock(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s" / "state.json", boot_id="boot-a")
    assert store.load().status == "missing"
    store.lock()
    store.save({"svc": {"pid": 10, "state": "ready", "tracker": {}, "users": ["a"]}})
    loaded = store.load()
    assert loaded.trusted
    assert loaded.services["svc"]["pid"] == 10
    other = StateStore(tmp_path / "s" / "state.json", boot_id="boot-a")
    with pytest.raises(StateLocked, match="in use by another agent"):
        other.lock()
    store.unlock()
    other.lock()
    other.unlock()
    rebooted = StateStore(tmp_path / "s" / "state.json", boot_id="boot-b").load()
    assert rebooted.status == "other_boot"
    assert rebooted.needs_rediscovery
    assert "pid" not in rebooted.services["svc"]
    assert "users" not in rebooted.services["svc"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"[]",
        b'{"format": "x"}',
        b'{"format": "srt-oarbank-state", "version": 2}',
        b'{"format": "srt-oarbank-state", "version": 1, "services": []}',
        b"\xff",
    ],
)
def test_state_store_never_crashes_on_garbage(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    loaded = StateStore(path, boot_id="b").load()
    assert loaded.status == "corrupt"
    assert not loaded.trusted
    assert (tmp_path / "state.json.corrupt").read_bytes() == content
    assert not path.exists()


def test_pool_ledger_numbers() -> None:
    res = NodeResources()
    res.set_capacity("a", {"slots": 2})
    res.set_capacity("b", {"slots": 1, "gpu": 0})
    assert res.capacity("slots") == 3
    assert res.capacity("gpu") == 0
    res.reserve("x", {"slots": 2})
    with pytest.raises(PoolExhausted) as info:
        res.reserve("y", {"slots": 2})
    assert (info.value.requested, info.value.free, info.value.capacity) == (2, 1, 3)
    assert res.reserved("slots") == 2, "a refused reservation must not reserve anything"
    with pytest.raises(PoolExhausted, match="'gpu'"):
        res.check_pools({}, frozenset({"gpu"}))
    res.release("x")
    res.release("x")
    assert res.reserved("slots") == 0


def test_memory_budget() -> None:
    res = NodeResources(mem_budget_gb=10)
    res.check_memory({"service:a": 6})
    res.charge("service:a", 6)
    res.charge("service:a", 6)  # idempotent per holder
    assert res.mem_charged_gb == 6
    with pytest.raises(MemoryExhausted) as info:
        res.check_memory({"job": 5})
    assert "need 5 GB (job 5 GB), 4 GB free of 10 GB" in str(info.value)
    res.check_memory({"service:a": 6})  # already charged: no extra
    res.discharge("service:a")
    assert res.mem_charged_gb == 0
    NodeResources().check_memory({"x": 10**6})  # no budget: unlimited


def test_health_filter_thresholds() -> None:
    f = HealthFilter(failure_threshold=3, success_threshold=2)
    assert f.state is None
    assert not f.available
    assert not f.observe(True)
    assert f.observe(True)
    assert f.available
    for ok in (False, False, True, False, False):
        assert not f.observe(ok), "announced before the failure threshold"
        assert not f.available, "available right after an unhealthy report"
    assert f.observe(False)
    assert not f.available
    assert not f.observe(True) and not f.available, "regained before the success threshold"
    assert f.observe(True) and f.available
    g = HealthFilter()
    assert g.observe(False), "first failure from unknown settles at once"
    assert g.state is False
    with pytest.raises(ValueError):
        HealthFilter(0, 1)


def test_fake_clock_orders_sleepers_and_wait_event() -> None:
    async def main() -> None:
        clock = FakeClock(start=0)
        order: list[str] = []

        async def sleeper(name: str, delay: float) -> None:
            await clock.sleep(delay)
            order.append(f"{name}@{clock.monotonic():g}")
            if name == "a":
                await clock.sleep(1)
                order.append(f"a2@{clock.monotonic():g}")

        tasks = [asyncio.ensure_future(sleeper("b", 5)), asyncio.ensure_future(sleeper("a", 2))]
        await clock.advance(10)
        await asyncio.gather(*tasks)
        assert order == ["a@2", "a2@3", "b@5"]
        assert clock.monotonic() == 10
        event = asyncio.Event()
        waiter = asyncio.ensure_future(wait_event(event, clock, 4))
        await clock.advance(3)
        assert not waiter.done()
        await clock.advance(1)
        assert await waiter is False
        event.set()
        assert await wait_event(event, clock, 4) is True
        assert clock.pending() == 0

    run(main())


def test_names_and_object_ids() -> None:
    for good in ("svc", "a.b-c_d", "0x"):
        assert check_name(good) == good
    for bad in ("", "../x", "a/b", ".", "..", "-rf", "a\nb", "x" * 200, "\uff41"):
        with pytest.raises(ValueError):
            check_name(bad)
    assert check_object_id("vm-1") == "vm-1"
    for bad in ("", "--force", "-x", "a\x00b", "a\nb", "x" * 600):
        assert not is_object_id(bad)


def test_platforms() -> None:
    here = current_platform()
    assert here.count("-") == 1
    assert platform_matches([], here)
    assert platform_matches([here.split("-")[0]], here)
    assert platform_matches(["linux-amd64"], "linux-x86_64")
    assert platform_matches(["darwin-arm64"], "darwin-aarch64")
    assert not platform_matches(["windows"], "linux-x86_64")


def test_file_liveness(tmp_path: Path) -> None:
    path = tmp_path / "live.json"
    check = file_liveness(path)
    with pytest.raises(LivenessUnknown):
        run(check(frozenset({"a"})))
    path.write_text(json.dumps({"live": ["a"]}))
    assert run(check(frozenset({"a", "b"}))) == {"a": True, "b": False}
    path.write_text(json.dumps(["b"]))
    assert run(check(frozenset({"a", "b"}))) == {"a": False, "b": True}
    path.write_text(json.dumps({"live": "a"}))
    with pytest.raises(LivenessUnknown):
        run(check(frozenset({"a"})))
    # A scoped writer speaks only for its own attempts; with "dead" it names the dead.
    path.write_text(json.dumps({"scope": "srt.j.", "live": ["srt.j.a"]}))
    assert run(check(frozenset({"srt.j.a", "srt.j.b", "other"}))) == {
        "srt.j.a": True,
        "srt.j.b": False,
    }
    path.write_text(json.dumps({"scope": "srt.j.", "live": ["srt.j.a"], "dead": ["srt.j.b"]}))
    assert run(check(frozenset({"srt.j.a", "srt.j.b", "srt.j.new", "other"}))) == {
        "srt.j.a": True,
        "srt.j.b": False,
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["live", "dead", "scope", "x"]), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(JSON)
def test_file_liveness_answers_or_says_unknown_for_any_document(
    tmp_path: Path, document: object
) -> None:
    """Any JSON a writer may leave: a mapping of booleans over the asked ids, or unknown."""
    path = tmp_path / "live.json"
    path.write_text(json.dumps(document))
    asked = frozenset({"a", "srt.j.a", "x"})
    try:
        answer = run(file_liveness(path)(asked))
    except LivenessUnknown:
        return
    assert set(answer) <= asked and all(isinstance(v, bool) for v in answer.values())


def test_bundle_rejects_exec_paths_leaving_the_bundle(tmp_path: Path) -> None:
    manifest = {"name": "m", "services": [{"name": "s", "exec": ["../../bin/sh"]}]}
    (tmp_path / "oarbank-module.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match="leaves the bundle"):
        load_bundle(tmp_path)
    manifest["services"][0]["exec"] = ["bin/../bin/svc"]  # type: ignore[index]
    (tmp_path / "oarbank-module.json").write_text(json.dumps(manifest))
    assert load_bundle(tmp_path).manifest.services[0].exec == ["bin/../bin/svc"]
    (tmp_path / "oarbank-module.json").write_text("{nope")
    with pytest.raises(ManifestError, match="not JSON"):
        load_bundle(tmp_path)
    with pytest.raises(ManifestError, match="does not exist"):
        load_bundle(tmp_path / "missing")
