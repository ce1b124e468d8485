"""The conformance runner passes a good module and fails a broken one with the right IDs."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from oarbank_testkit import SRC_DIR, FakeBundle, service_entry

from srt_oarbank.conformance import (
    CHECKS,
    ConformanceRunner,
    RunnerOptions,
    format_junit,
    format_tap,
    passed,
)

pytestmark = pytest.mark.timeout(120)

BundleFactory = Callable[..., FakeBundle]

GOOD = {"start_creates": [{"id": "vm-1", "kind": "vm", "busy": True}, {"id": "vol-1"}]}
BROKEN = {
    **GOOD,
    "broken": ["stop_not_idempotent", "missing_labels", "fingerprint_writes", "unknown_op_succeeds"],
}


def good_bundle(factory: BundleFactory, config: dict[str, object]) -> FakeBundle:
    fake = factory(services=[service_entry()], config=config)
    # The call log lives outside the data dir, or every call would "change state".
    fake.update_config(call_log=str(fake.root.parent / "calls.jsonl"))
    return fake


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SRC_DIR)}
    return subprocess.run(
        [sys.executable, "-m", "srt_oarbank.conformance", *args],
        env=env, capture_output=True, text=True, timeout=100,
    )


def test_check_ids_are_unique_and_numbered() -> None:
    ids = [c.id for c in CHECKS]
    assert ids == [f"SP-{n:03d}" for n in range(1, len(ids) + 1)]


def test_good_module_passes_every_check_with_tap_and_junit(
    bundle_factory: BundleFactory, tmp_path: Path
) -> None:
    fake = good_bundle(bundle_factory, GOOD)
    junit = tmp_path / "report.xml"
    done = cli("--bundle", str(fake.root), "--tap", "--junit", str(junit), str(fake.root / "bin/fake"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["TAP version 13", f"1..{len(CHECKS)}"]
    assert not any(line.startswith("not ok") for line in lines)
    assert not any("# SKIP" in line for line in lines), "the good fake should exercise every check"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        str(len(CHECKS)), "0", "0",
    )
    assert fake.service_pids() and fake.service_pid() is None, "the runner left the service up"
    assert fake.objects() == [], "the runner left created objects behind"


def test_broken_module_fails_exactly_the_violated_checks(bundle_factory: BundleFactory) -> None:
    fake = good_bundle(bundle_factory, BROKEN)
    options = RunnerOptions(bundle_root=fake.root, ready_timeout_s=10)
    results = ConformanceRunner([str(fake.root / "bin/fake")], options).run()
    failed = {r.check.id for r in results if r.outcome == "fail"}
    assert failed == {"SP-004", "SP-007", "SP-014", "SP-022", "SP-023"}
    assert not passed(results)
    tap = format_tap(results)
    assert "not ok 7 - SP-007" in tap and "not ok 23 - SP-023" in tap
    root = ET.fromstring(format_junit(results).split("\n", 1)[1])
    failures = [case.get("name", "")[:6] for case in root.iter("testcase") if case.find("failure") is not None]
    assert sorted(failures) == sorted(failed)
    assert fake.service_pid() is None


def test_cli_exit_code_is_1_on_failures_and_probe_mode(bundle_factory: BundleFactory) -> None:
    fake = good_bundle(bundle_factory, BROKEN)
    done = cli("--bundle", str(fake.root), str(fake.root / "bin/fake"))
    assert done.returncode == 1
    assert "FAIL SP-023" in done.stdout
    probe = cli("--probe", "--bundle", str(fake.root), str(fake.root / "bin/fake"))
    # As a probe only fingerprint matters; the broken fingerprint still writes files.
    assert probe.returncode == 1
    assert [line.split()[1] for line in probe.stdout.splitlines()[:-1]] == [
        "SP-001", "SP-002", "SP-003", "SP-004", "SP-025",
    ]
    fake.update_config(broken=[])
    assert cli("--probe", "--bundle", str(fake.root), str(fake.root / "bin/fake")).returncode == 0


def test_missing_executable_fails_cleanly(tmp_path: Path) -> None:
    results = ConformanceRunner(["./nope"], RunnerOptions(bundle_root=tmp_path)).run()
    assert {r.check.id for r in results if r.outcome == "fail"} >= {"SP-001", "SP-003", "SP-005"}
    assert "no such file" in results[0].message
