"""The conformance runner passes a good module and fails a broken one with the right IDs."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from oarbank_testkit import SRC_DIR, FakeBundle, ProcessTracker, service_entry
from srt_oarbank.conformance.runner import (
    CHECKS,
    ConformanceRunner,
    RunnerOptions,
    format_junit,
    format_tap,
    passed,
)
from srt_oarbank.conformance.runner import (
    main as conformance_main,
)

pytestmark = pytest.mark.timeout(120)

BundleFactory = Callable[..., FakeBundle]

GOOD: dict[str, Any] = {
    "start_creates": [{"id": "vm-1", "kind": "vm", "busy": True}, {"id": "vol-1"}]
}
BROKEN: dict[str, Any] = {
    **GOOD,
    "broken": [
        "stop_not_idempotent",
        "missing_labels",
        "fingerprint_writes",
        "unknown_op_succeeds",
    ],
}


def good_bundle(
    factory: BundleFactory, config: dict[str, Any], procs: ProcessTracker
) -> FakeBundle:
    fake = factory(services=[service_entry()], config=config)
    procs.watch(fake.root.parent)
    # The call log lives outside the data dir, or every call would "change state".
    fake.update_config(call_log=str(fake.root.parent / "calls.jsonl"))
    return fake


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(SRC_DIR)}
    return subprocess.run(
        [sys.executable, "-m", "srt_oarbank.conformance", *args],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=100,
    )


def test_check_ids_are_unique_and_numbered() -> None:
    ids = [c.id for c in CHECKS]
    assert ids == [f"SP-{n:03d}" for n in range(1, len(ids) + 1)]


def test_good_module_passes_every_check_with_tap_and_junit(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    fake = good_bundle(bundle_factory, GOOD, procs)
    junit = tmp_path / "report.xml"
    done = cli(
        "--bundle",
        str(fake.root),
        "--data",
        str(fake.data_dir),
        "--tap",
        "--junit",
        str(junit),
        str(fake.root / "bin/fake"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["TAP version 13", f"1..{len(CHECKS)}"]
    assert not any(line.startswith("not ok") for line in lines)
    assert not any("# SKIP" in line for line in lines), "the good fake should exercise every check"
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == (
        str(len(CHECKS)),
        "0",
        "0",
    )
    svc = "conformance"  # the runner's default OARBANK_SERVICE
    assert fake.service_pids(svc), "the runner never started the service"
    assert fake.service_pid(svc) is None, "the runner left it up"
    assert fake.objects(svc) == [], "the runner left created objects behind"


def test_broken_module_fails_exactly_the_violated_checks(
    bundle_factory: BundleFactory, procs: ProcessTracker
) -> None:
    fake = good_bundle(bundle_factory, BROKEN, procs)
    options = RunnerOptions(bundle_root=fake.root, data_dir=fake.data_dir, ready_timeout_s=10)
    results = ConformanceRunner([str(fake.root / "bin/fake")], options).run()
    failed = {r.check.id for r in results if r.outcome == "fail"}
    assert failed == {"SP-004", "SP-007", "SP-014", "SP-022", "SP-023"}
    assert not passed(results)
    tap = format_tap(results)
    assert "not ok 7 - SP-007" in tap
    assert "not ok 23 - SP-023" in tap
    root = ET.fromstring(format_junit(results).split("\n", 1)[1])
    failures = [
        case.get("name", "")[:6]
        for case in root.iter("testcase")
        if case.find("failure") is not None
    ]
    assert sorted(failures) == sorted(failed)
    assert fake.service_pid("conformance") is None


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
        "SP-025",
    ]
    assert "FAIL SP-004" in out
    fake.update_config(broken=[])
    assert conformance_main(["--probe", *common, str(fake.root / "bin/fake")]) == 0
    with pytest.raises(SystemExit) as usage:
        conformance_main(["--timeout", "bogus=1", "x"])
    assert usage.value.code == 2
    assert fake.calls("start", "conformance") == [], "probe mode must not start anything"
    assert fake.calls("fingerprint", "conformance"), "the probe was not run at all"


def test_missing_executable_fails_cleanly(tmp_path: Path) -> None:
    results = ConformanceRunner(["./nope"], RunnerOptions(bundle_root=tmp_path)).run()
    assert {r.check.id for r in results if r.outcome == "fail"} >= {"SP-001", "SP-003", "SP-005"}
    assert "no such file" in results[0].message
