"""The conformance runner passes a spec-correct module and rejects every broken variant, naming
exactly the checks each one violates, and says which failures are the spec's and which are
srt's schema."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from oarbank_protocol.conformance import suite as runner_module
from oarbank_protocol.conformance.checks import SPEC, SRT_SCHEMA
from oarbank_protocol.conformance.cli import main as conformance_main
from oarbank_protocol.conformance.report import format_junit, format_tap, format_text, passed
from oarbank_protocol.conformance.runner import (
    CHECKS,
    CheckResult,
    ConformanceRunner,
    RunnerOptions,
)
from oarbank_testkit import SRC_DIR, FakeBundle, ProcessTracker, service_entry

pytestmark = pytest.mark.timeout(120)

BundleFactory = Callable[..., FakeBundle]

GOOD: dict[str, Any] = {
    "start_creates": [{"id": "vm-1", "kind": "vm", "busy": True}, {"id": "vol-1"}],
    # start lingers after recording what it started, so the runner can kill it part-way
    "start_sleep_after_spawn_s": 0.5,
}

#: Each broken variant (the fake's ``broken`` knobs) and exactly the checks it must fail.
VARIANTS: dict[str, set[str]] = {
    "stop_not_idempotent": {"SP-008", "SP-023", "SP-027"},
    "missing_labels": {"SP-015"},
    "fingerprint_writes": {"SP-005"},
    "unknown_op_succeeds": {"SP-028"},
    "ready_never": {"SP-011"},
    "stop_lies": {"SP-021", "SP-022", "SP-027"},
    "second_instance": {"SP-010", "SP-022", "SP-027"},
    "destroy_lies": {"SP-024", "SP-025"},
    "ready_without_running": {"SP-007", "SP-021", "SP-029"},
    "stop_leaves_child": {"SP-022", "SP-027"},
    "busy_after_stop": {"SP-022", "SP-027"},
    "start_timeout_leak": {"SP-027"},
    "kind_missing": {"SP-016"},
    "bad_error_doc": {"SP-030"},
    "foreign_labels": {"SP-032"},
}


def good_bundle(
    factory: BundleFactory, config: dict[str, Any], procs: ProcessTracker, **service: Any
) -> FakeBundle:
    fake = factory(services=[service_entry(**service)], config=config)
    procs.watch(fake.root.parent)
    # The call log lives outside the data dir, or every call would "change state".
    fake.update_config(call_log=str(fake.root.parent / "calls.jsonl"))
    return fake


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SRC_DIR)}
    return subprocess.run(
        [sys.executable, "-m", "oarbank_protocol.conformance", *args],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=100,
    )


def run_checks(fake: FakeBundle, **options: Any) -> list[CheckResult]:
    opts = RunnerOptions(
        bundle_root=fake.root,
        data_dir=fake.data_dir,
        service="svc",
        ready_timeout_s=5,
        **options,
    )
    return ConformanceRunner([str(fake.root / "bin/fake")], opts).run()


def failed(results: list[CheckResult]) -> set[str]:
    return {r.check.id for r in results if r.outcome == "fail"}


def test_every_check_id_is_declared_once_with_its_source() -> None:
    ids = [c.id for c in CHECKS]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"SP-\d{3}", i) for i in ids)
    assert {c.source for c in CHECKS} == {SPEC, SRT_SCHEMA}
    source = Path(runner_module.__file__).read_text()
    for check_id in ids:
        assert source.count(f'"{check_id}"') == 1, f"{check_id} is written more than once"
    by_id = {c.id: c for c in CHECKS}
    assert by_id["SP-016"].source == by_id["SP-030"].source == SRT_SCHEMA  # kind, error shape
    assert by_id["SP-015"].source == SPEC  # the three labels are the spec's


def test_good_module_passes_every_check_with_tap_and_junit(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    # Marked as reserving memory and yieldable, so the checks for those run too.
    config = {**GOOD, "reserve_mem_gb": 4}
    fake = good_bundle(bundle_factory, config, procs, reserves_host_memory=True, yieldable=True)
    junit = tmp_path / "report.xml"
    done = cli(
        "--bundle",
        str(fake.root),
        "--data",
        str(fake.data_dir),
        "--tap",
        "--junit",
        str(junit),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["TAP version 13", f"1..{len(CHECKS)}"]
    assert not any(line.startswith("not ok") for line in lines)
    assert not any("# SKIP" in line for line in lines), done.stdout
    assert "ok 1 - SP-001 [spec] fingerprint" in done.stdout
    assert "SP-030 [srt schema]" in done.stdout
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        str(len(CHECKS)),
        "0",
        "0",
    )
    # names and exec came from the manifest: OARBANK_SERVICE is the manifest's "svc"
    assert fake.service_pids("svc"), "the runner never started the service"
    assert fake.service_pid("svc") is None, "the runner left it up"
    assert fake.objects("svc") == [], "the runner left created objects behind"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_each_broken_variant_fails_exactly_its_checks(
    bundle_factory: BundleFactory, procs: ProcessTracker, variant: str
) -> None:
    fake = good_bundle(bundle_factory, {**GOOD, "broken": [variant]}, procs)
    results = run_checks(fake)
    assert failed(results) == VARIANTS[variant], format_text(results)
    assert not passed(results)
    fake.stop_everything()


def test_what_the_agent_relies_on_memory_reserve_and_resume(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    """SP-033 and SP-034 apply to services the manifest marks reserves_host_memory and
    yieldable: a reserve of 0 GB protects nothing, a service that never comes back after a
    stop cannot resume after a yield."""
    fake = good_bundle(bundle_factory, {**GOOD, "reserve_mem_gb": 0}, procs)
    skipped = {r.check.id: r.outcome for r in run_checks(fake)}
    assert (skipped["SP-033"], skipped["SP-034"]) == ("skip", "skip")
    marked = {"reserves_host_memory": True, "yieldable": True}
    results = run_checks(fake, **marked)
    assert failed(results) == {"SP-033"}, format_text(results)
    assert "reserve.mem_gb is 0" in format_text(results)
    fake.update_config(reserve_mem_gb=4)
    results = run_checks(fake, **marked)
    assert failed(results) == set(), format_text(results)
    outcomes = {r.check.id: r.outcome for r in results}
    assert (outcomes["SP-033"], outcomes["SP-034"]) == ("pass", "pass")
    fake.stop_everything()
    assert fake.service_pid("svc") is None


def test_all_old_violations_together(bundle_factory: BundleFactory, procs: ProcessTracker) -> None:
    broken = ["stop_not_idempotent", "missing_labels", "fingerprint_writes", "unknown_op_succeeds"]
    fake = good_bundle(bundle_factory, {**GOOD, "broken": broken}, procs)
    results = run_checks(fake)
    assert failed(results) == {"SP-005", "SP-008", "SP-015", "SP-023", "SP-027", "SP-028"}
    tap = format_tap(results)
    assert "not ok 8 - SP-008 [spec]" in tap
    assert "not ok 28 - SP-028 [spec]" in tap
    root = ET.fromstring(format_junit(results).split("\n", 1)[1])
    failures = [
        case.get("name", "")[:6]
        for case in root.iter("testcase")
        if case.find("failure") is not None
    ]
    assert sorted(failures) == sorted(failed(results))
    assert fake.service_pid("svc") is None


def test_srt_schema_failures_are_told_apart_and_spec_only_skips_them(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    broken = {**GOOD, "broken": ["kind_missing", "bad_error_doc"], "reserve_mem_gb": 4}
    fake = good_bundle(bundle_factory, broken, procs)
    results = run_checks(fake)
    assert failed(results) == {"SP-016", "SP-030"}
    assert {r.check.source for r in results if r.outcome == "fail"} == {SRT_SCHEMA}
    assert "2 failed (0 spec, 2 srt schema)" in format_text(results)
    # Every spec check runs (those for memory-reserving, yieldable services too).
    spec_only = run_checks(fake, spec_only=True, reserves_host_memory=True, yieldable=True)
    assert passed(spec_only)
    skipped = {r.check.id for r in spec_only if r.outcome == "skip"}
    assert skipped == {c.id for c in CHECKS if c.source == SRT_SCHEMA}


def test_the_manifest_gives_the_timeouts(
    bundle_factory: BundleFactory, procs: ProcessTracker, capsys: pytest.CaptureFixture[str]
) -> None:
    """fingerprint takes 0.5 s: within the spec's 5 s, past the manifest's 0.3 s."""
    fake = good_bundle(
        bundle_factory,
        {**GOOD, "ops": {"fingerprint": {"sleep_s": 0.5}}},
        procs,
        timeouts={"fingerprint": 0.3},
    )
    common = ["--bundle", str(fake.root), "--data", str(fake.data_dir), "--probe"]
    manifest = json.loads((fake.root / "oarbank-module.json").read_text())
    manifest["probes"] = [{"name": "fp", "exec": ["bin/fake"], "timeout_s": 0.3}]
    (fake.root / "oarbank-module.json").write_text(json.dumps(manifest))
    assert conformance_main([*common, "--service", "fp"]) == 1
    out = capsys.readouterr().out
    assert "FAIL SP-001" in out and "timed out after 0.3 s" in out
    manifest["probes"][0]["timeout_s"] = 3
    (fake.root / "oarbank-module.json").write_text(json.dumps(manifest))
    assert conformance_main([*common, "--service", "fp"]) == 0
    capsys.readouterr()


def test_cli_exit_codes_and_probe_mode(
    bundle_factory: BundleFactory, procs: ProcessTracker, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = good_bundle(bundle_factory, {"broken": ["fingerprint_writes"]}, procs)
    common = ["--bundle", str(fake.root), "--data", str(fake.data_dir)]
    # As a probe only fingerprint matters, and this one writes files when it should not.
    assert conformance_main(["--probe", *common, str(fake.root / "bin/fake")]) == 1
    out = capsys.readouterr().out
    assert [line.split()[1] for line in out.splitlines()[:-1]] == [
        "SP-001",
        "SP-002",
        "SP-003",
        "SP-004",
        "SP-005",
        "SP-031",
        "SP-035",
    ]
    assert "FAIL SP-005" in out
    fake.update_config(broken=[])
    assert conformance_main(["--probe", *common, str(fake.root / "bin/fake")]) == 0
    with pytest.raises(SystemExit) as usage:
        conformance_main(["--timeout", "bogus=1", "x"])
    assert usage.value.code == 2
    assert conformance_main([*common, "--service", "nope"]) == 2
    assert "has no service 'nope'" in capsys.readouterr().err
    # no probe entry in the manifest: EXEC runs under the runner's default name
    assert fake.calls("start", "conformance") == [], "probe mode must not start anything"
    assert fake.calls("fingerprint", "conformance"), "the probe was not run at all"


def test_an_excluded_platform_is_not_checked(
    bundle_factory: BundleFactory, procs: ProcessTracker, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = good_bundle(bundle_factory, GOOD, procs, platforms=["windows"])
    assert conformance_main(["--bundle", str(fake.root), "--data", str(fake.data_dir)]) == 2
    assert "does not run on" in capsys.readouterr().err
    assert fake.calls(service="svc") == []


def test_missing_executable_fails_cleanly(tmp_path: Path) -> None:
    results = ConformanceRunner(["./nope"], RunnerOptions(bundle_root=tmp_path)).run()
    assert failed(results) >= {"SP-001", "SP-004", "SP-006"}
    assert "no such file" in results[0].message


def test_the_readme_lists_the_checks_as_declared(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert conformance_main(["--list"]) == 0
    table = capsys.readouterr().out
    assert table in readme, "regenerate the README's table with --list"
    assert table.count("| SP-") == len(CHECKS)
