"""The ``oarbank`` kind under ``srt run``: settings reach the module unchanged, and every way a
job ends goes through the protocol (stop, escalation, reaping of owned objects).

The module is the fake executable; its owned object is a real file outside every process
tree (like a VM disk or a container), so only the protocol can remove it: srt's own sweep of
the job's processes cannot. Each test ends with the fake's processes and the job's processes
gone.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from oarbank_testkit import FakeBundle, ProcessTracker, alive, service_entry, wait_until
from srt_services.testing.jobs import JobRun, start_srt
from srt_services.testing.survivors import assert_no_survivors

pytestmark = pytest.mark.timeout(180)

BundleFactory = Callable[..., FakeBundle]

SETTINGS: dict[str, Any] = {
    "attempt_id": "job-{node}-7",
    "escaped": "{{x}}",
    "nested": {"list": [1, 2.5, {"deep": "{work_dir}"}], "empty": {}, "braces": "}{"},
    "unicode": "é ✓",
    "flag": True,
    "nothing": None,
}


class Job:
    """One ``srt run`` of a recipe whose service ``mod`` is the fake module via the kind."""

    def __init__(self, tmp: Path, fake: FakeBundle, procs: ProcessTracker) -> None:
        self.tmp = tmp
        self.fake = fake
        self.procs = procs
        self.job_dir = tmp / "job"
        self.data = self.job_dir / "work" / "service_mod" / "data"
        procs.watch(self.data)
        self.run: JobRun | None = None

    def start(self, options: dict[str, Any], *more_services: str) -> JobRun:
        opts = {"bundle": str(self.fake.root), "service": "svc", **options}
        text = (
            "schema: 2\nname: kindjob\nobservability:\n  metrics: false\nservices:\n"
            f"  - {{name: mod, type: oarbank, options: {json.dumps(opts)}}}\n"
        )
        text += "".join(f"  - {s}\n" for s in more_services)
        recipe = self.tmp / "job.yaml"
        recipe.write_text(text)
        self.run = start_srt(["run", str(recipe)], str(self.job_dir))
        return self.run

    def calls(self, op: str) -> list[dict[str, Any]]:
        path = self.data / "fake-state" / "svc" / "calls.jsonl"
        if not path.exists():
            return []
        entries = [json.loads(line) for line in path.read_text().splitlines()]
        return [e for e in entries if e["event"] == "begin" and e["op"] == op]

    def agent_log(self) -> str:
        path = self.job_dir / "logs" / "service_mod.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def finish(self) -> None:
        assert self.run is not None
        self.run.stop()
        assert_no_survivors(str(self.job_dir))


def file_bundle(factory: BundleFactory, outside: Path, **config: Any) -> FakeBundle:
    outside.mkdir(parents=True, exist_ok=True)
    creates = [{"id": "disk-1", "kind": "volume", "path": str(outside / "disk-1")}]
    return factory(
        services=[service_entry(lifecycle="on_demand", status_period_s=0.3)],
        config={"start_creates": creates, **config},
    )


def test_settings_reach_the_module_unchanged(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    fake = bundle_factory(services=[service_entry()])
    job = Job(tmp_path, fake, procs)
    tools = {"docker": "/usr/bin/{docker}"}
    limits = {"mem_gb": 4, "note": "{{cap}}"}
    run = job.start(
        {"settings": SETTINGS, "tools": tools, "limits": limits},
        "{name: end, terminal: true, after: [mod], command: [sleep, '0.2']}",
    ).wait(120)
    assert run.code == 0, run.stderr + job.agent_log()
    calls = job.calls("fingerprint") + job.calls("start") + job.calls("ready")
    assert calls, "the module was never called"
    assert all(c["settings"] == SETTINGS for c in calls), [
        (c["op"], c["settings"]) for c in calls if c["settings"] != SETTINGS
    ]
    assert all((c["tools"], c["limits"]) == (tools, limits) for c in calls)
    assert job.calls("stop"), "the job's end did not stop the service through the protocol"
    assert_no_survivors(str(job.job_dir))


def assert_stopped_through_the_protocol(job: Job, outside: Path) -> None:
    assert job.calls("stop"), "no protocol stop:\n" + job.agent_log()
    assert not (outside / "disk-1").exists(), "the owned object leaked:\n" + job.agent_log()
    assert [c["argv"] for c in job.calls("destroy")][-1][:2] == ["destroy", "disk-1"]
    pids = _service_pids(job)
    assert pids and not [p for p in pids if alive(p)]
    assert " ERROR " not in job.agent_log(), "the agent reported an incomplete teardown"
    status = json.loads((job.data.parent / "status.json").read_text())
    assert (status["state"], status["leftover_ids"]) == ("stopped", [])


def _service_pids(job: Job) -> list[int]:
    path = job.data / "fake-state" / "svc" / "service-pids.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def test_critical_failure_elsewhere_stops_the_module_through_the_protocol(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    job = Job(tmp_path, file_bundle(bundle_factory, outside), procs)
    run = job.start(
        {},
        "{name: boom, critical: true, after: [mod], command: [sh, -c, 'sleep 0.5; exit 3']}",
    ).wait(120)
    assert run.code == 1
    assert run.result()["cause"]["unit"] == "boom"
    assert_stopped_through_the_protocol(job, outside)
    assert_no_survivors(str(job.job_dir))


@pytest.mark.parametrize("how", ["sigint", "sigterm", "srt-stop"])
def test_ending_the_job_stops_the_module_through_the_protocol(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path, how: str
) -> None:
    outside = tmp_path / "outside"
    job = Job(tmp_path, file_bundle(bundle_factory, outside), procs)
    run = job.start({}, "{name: hold, after: [mod], command: [sleep, '1000']}")
    try:
        run.wait_event("serving", timeout=60)
        assert (outside / "disk-1").exists()
        if how == "srt-stop":
            subprocess.run(
                [sys.executable, "-m", "srt_services", "stop", str(job.job_dir)],
                check=True,
                capture_output=True,
                timeout=120,
            )
        else:
            run.signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
        run.wait(120)
    finally:
        job.finish()
    assert_stopped_through_the_protocol(job, outside)


def test_P11_a_failing_stop_escalates_to_destroy_force_under_srt(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    fake = bundle_factory(
        services=[service_entry(status_period_s=0.3)],
        config={
            "start_creates": [
                {
                    "id": "vm-1",
                    "kind": "vm",
                    "busy": True,
                    "kills_service": True,
                    "path": str(outside / "vm-1"),
                }
            ],
            "ops": {"stop": {"exit_code": 1, "error_doc": {"code": 100, "msg": "hung"}}},
        },
    )
    job = Job(tmp_path, fake, procs)
    run = job.start({}, "{name: hold, after: [mod], command: [sleep, '1000']}")
    try:
        run.wait_event("serving", timeout=60)
        run.signal(signal.SIGTERM)
        run.wait(120)
    finally:
        job.finish()
    forced = [c["argv"] for c in job.calls("destroy")]
    assert ["destroy", "vm-1", "--force"] in forced, job.agent_log()
    assert not (outside / "vm-1").exists()
    assert not [p for p in _service_pids(job) if alive(p)]
    assert "stop_escalated" in job.agent_log()


def test_readiness_timeout_stops_the_module_through_the_protocol(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    job = Job(tmp_path, file_bundle(bundle_factory, outside, broken=["ready_never"]), procs)
    try:
        run = job.start({"ready_timeout_seconds": 3}).wait(120)
        assert run.code == 1
        assert "readiness timeout" in run.stderr or "not ready within" in run.stderr
        assert wait_until(lambda: bool(job.calls("stop")), 10)
        assert_stopped_through_the_protocol(job, outside)
    finally:
        for pid in _service_pids(job):  # what the SIGKILLed agent could not stop
            procs.add(pid)
        job.fake.stop_everything()
        (outside / "disk-1").unlink(missing_ok=True)
        assert_no_survivors(str(job.job_dir))


def test_unsupported_platform_exits_at_once_without_calling_the_module(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    fake = bundle_factory(services=[service_entry(platforms=["windows"])])
    job = Job(tmp_path, fake, procs)
    run = job.start({"ready_timeout_seconds": 60}).wait(90)
    assert run.code == 1
    assert run.elapsed < 45, "srt waited for a readiness that could never come"
    assert "does not run on platform" in job.agent_log()
    assert run.result()["cause"]["kind"] == "exited_before_ready"
    assert job.calls("ready") == [] and job.calls("fingerprint") == []
    assert_no_survivors(str(job.job_dir))


def test_kind_readiness_waits_as_long_as_the_manifest_allows(tmp_path: Path) -> None:
    from srt_oarbank.srt.kind import OarbankKind, OarbankOptions, default_ready_timeout

    bundle = tmp_path / "b"
    bundle.mkdir()
    (bundle / "oarbank-module.json").write_text(
        json.dumps(
            {
                "name": "m",
                "services": [
                    {
                        "name": "vm",
                        "exec": ["bin/x"],
                        "start_timeout_s": 200,
                        "ready_timeout_s": 900,
                        "timeouts": {"fingerprint": 7, "ready": 12},
                    }
                ],
            }
        )
    )
    options = OarbankOptions(bundle=str(bundle), service="vm")
    assert default_ready_timeout(options) == 7 + 200 + 900 + 30
    probe = OarbankKind().readiness(None, options, None)  # type: ignore[arg-type]
    assert probe.timeout == 7 + 200 + 900 + 30
    assert probe.config["agent_data"] is True
    assert probe.config["status_file"] == "{work_dir}/status.json"
    fixed = OarbankOptions(
        bundle=str(bundle), service="vm", ready_timeout_seconds=5, timeouts={"ready": 3}
    )
    probe = OarbankKind().readiness(None, fixed, None)  # type: ignore[arg-type]
    assert probe.timeout == 5
    assert probe.config["timeouts"] == {"ready": 3}


def test_literal_json_survives_srts_rendering() -> None:
    from srt_oarbank.srt.kind import literal_json
    from srt_services.extend import render

    text = literal_json(SETTINGS)
    assert render(text, {"node": "n0", "work_dir": "/w"}) == text
    assert json.loads(text) == SETTINGS
    assert textwrap.dedent(text) == text


def test_kind_validation_of_timeouts_and_stop_grace(
    bundle_factory: BundleFactory, tmp_path: Path
) -> None:
    fake = bundle_factory(services=[service_entry(timeouts={"stop": 300})])

    def validate(options: str) -> subprocess.CompletedProcess[str]:
        recipe = tmp_path / "v.yaml"
        recipe.write_text(
            "schema: 2\nname: v\nobservability:\n  metrics: false\nservices:\n"
            f"  - {{name: a, type: oarbank, options: {{bundle: '{fake.root}', service: svc"
            f"{options}}}}}\n"
        )
        return subprocess.run(
            [sys.executable, "-m", "srt_services", "validate", str(recipe)],
            capture_output=True,
            text=True,
            check=False,
        )

    out = validate(", timeouts: {ready: 0}")
    assert out.returncode == 2, out.stderr
    assert "services[a].options.timeouts.ready: must be > 0 seconds" in out.stderr
    out = validate("")
    assert out.returncode == 0, out.stderr
    assert "warning:" in out.stderr and "set stop_grace_seconds: 370" in out.stderr
    out = validate(", timeouts: {stop: 20}")
    assert out.returncode == 0 and "stop_grace_seconds" not in out.stderr


def test_the_ready_probe_waits_for_the_agent(tmp_path: Path) -> None:
    from srt_oarbank.srt.probes import agent_state

    status = tmp_path / "status.json"
    waiting = agent_state(str(status))
    assert waiting is not None and not waiting.ok and "agent to start" in waiting.detail
    status.write_text(json.dumps({"state": "backoff", "reason": "start failed: boom"}))
    backoff = agent_state(str(status))
    assert backoff is not None and backoff.detail == "agent: backoff: start failed: boom"
    status.write_text(json.dumps({"state": "ready", "reason": "ready"}))
    assert agent_state(str(status)) is None


def test_objects_of_an_attempt_that_dies_mid_job_are_reaped_while_the_job_runs(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    """Each instance of the job is an attempt (``srt.<job id>.<step>``); the kind keeps the
    live ones in the file its agent reaps by. ``doomed`` exits mid-job: its object goes on
    the reaping period while ``keeper``'s stays, and the job's end reaps the rest."""
    outside = tmp_path / "outside"
    outside.mkdir()

    def owned(name: str, step: str) -> dict[str, Any]:
        labels = {
            "oarbank.attempt_id": f"srt.job.{step}",
            "oarbank.node": "n1",
            "oarbank.service": "svc",
        }
        return {"id": name, "kind": "volume", "path": str(outside / name), "labels": labels}

    fake = bundle_factory(
        services=[service_entry(lifecycle="always", status_period_s=0.3)],
        config={
            "start_creates": [
                owned("doomed-disk", "service_doomed"),
                owned("keeper-disk", "service_keeper"),
                owned("stranger-disk", "other-job-step"),
            ]
        },
    )
    job = Job(tmp_path, fake, procs)
    mark = tmp_path / "end-now"
    run = job.start(
        {"node_id": "n1", "reap_period_seconds": 0.5},
        "{name: doomed, critical: false, restart: {policy: 'no'}, after: [mod], "
        "command: [sh, -c, 'sleep 8']}",
        "{name: keeper, critical: false, after: [mod], command: [sleep, '1000']}",
        f"{{name: end, terminal: true, after: [mod], command: [sh, -c, "
        f"'while [ ! -e {mark} ]; do sleep 0.2; done']}}",
    )
    live_file = job.data.parent / "live-attempts.json"
    try:
        run.wait_event("phase_ready", timeout=60, phase="after_frontend")
        assert wait_until(
            lambda: (
                live_file.exists()
                and "srt.job.service_doomed" in json.loads(live_file.read_text())["live"]
            ),
            30,
        ), "the kind did not write the live attempts"
        assert (outside / "doomed-disk").exists()
        assert wait_until(lambda: not (outside / "doomed-disk").exists(), 30), (
            "the dead attempt's object was not reaped while the job ran:\n" + job.agent_log()
        )
        live = json.loads(live_file.read_text())
        assert live["scope"] == "srt.job."
        assert "srt.job.service_keeper" in live["live"]
        assert "srt.job.service_doomed" in live["dead"]
        assert (outside / "keeper-disk").exists(), "reaped the object of a live attempt"
        assert (outside / "stranger-disk").exists(), "reaped an attempt the job cannot judge"
        assert run.proc.poll() is None, "the job ended before the check"
        mark.touch()
        run.wait(120)
        assert run.code == 0, run.stderr + job.agent_log()
    finally:
        job.finish()
    assert not (outside / "keeper-disk").exists(), "the job's end did not reap the rest"
    assert not (outside / "stranger-disk").exists()


def test_srt_kinds_states_the_readiness_dry_run_uses(tmp_path: Path) -> None:
    """``srt kinds oarbank`` said 120 s and 2 s; the probe that runs waits as long as the
    manifest allows and retries every second: the listing now says so."""
    bundle = tmp_path / "b"
    bundle.mkdir()
    service = {"name": "vm", "exec": ["bin/x"], "start_timeout_s": 200, "ready_timeout_s": 900}
    service["timeouts"] = {"fingerprint": 7}
    (bundle / "oarbank-module.json").write_text(json.dumps({"name": "m", "services": [service]}))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: k\nobservability: {metrics: false}\nservices:\n"
        f"  - {{name: mod, type: oarbank, options: {{bundle: '{bundle}', service: vm}}}}\n"
    )
    srt = [sys.executable, "-m", "srt_services"]
    listed = subprocess.run(
        [*srt, "kinds", "oarbank", "--json"], capture_output=True, text=True, check=True
    )
    kind = json.loads(listed.stdout)
    planned = subprocess.run(
        [*srt, "dry-run", "--json", str(recipe)], capture_output=True, text=True, check=True
    )
    plan = json.loads(planned.stdout)
    (unit,) = [u for u in plan["units"] if u["name"] == "mod"]
    probe = unit["instances"][0]["readiness"]
    assert probe["timeout"] == 7 + 200 + 900 + 30
    assert probe["interval"] == kind["readiness_interval"] == 1.0
    assert "manifest" in kind["readiness_timeout_summary"]
    text = subprocess.run([*srt, "kinds", "oarbank"], capture_output=True, text=True, check=True)
    (line,) = [ln for ln in text.stdout.splitlines() if ln.startswith("readiness timeout:")]
    assert "120 s" not in line and "options.ready_timeout_seconds" in line
