"""``uses:`` under ``srt run``: units admitted by an oarbank node agent the recipe runs.

The module is the fake executable, with an ``on_demand`` service that provides a pool of
one token. Two services of the job use it: the first is admitted (which starts the
service), the second is refused with the protocol's reason, which srt shows; when the first
ends, the service stops after its ``idle_timeout_s``. Every test ends with the fake's
processes and the job's processes gone.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from oarbank_testkit import FakeBundle, ProcessTracker, service_entry, wait_until
from srt_services.extend import processes
from srt_services.testing.jobs import start_srt
from srt_services.testing.survivors import assert_no_survivors

pytestmark = pytest.mark.timeout(180)

BundleFactory = Callable[..., FakeBundle]
IDLE_S = 1.5


def pool_bundle(factory: BundleFactory) -> FakeBundle:
    entry = service_entry(
        "svc", lifecycle="on_demand", pools=["slots"], idle_timeout_s=IDLE_S, status_period_s=0.3
    )
    return factory(module="fakemod", services=[entry], config={"pools": {"slots": 1}})


TOOLS = {"docker": "/usr/bin/docker"}
LIMITS = {"mem_gb": 4}


def recipe(tmp: Path, fake: FakeBundle, go: Path) -> Path:
    mod = {
        "bundle": str(fake.root),
        "service": "svc",
        "admissions": True,
        "settings": {"k": "{node}"},
        "tools": TOOLS,
        "limits": LIMITS,
    }
    first = {
        "name": "first",
        "after": ["mod"],
        "uses": [{"service": "mod", "pool": "slots", "tokens": 1}],
        "command": [
            "sh",
            "-c",
            'echo "$OARBANK_ATTEMPT_ID" > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done',
            "{work_dir}/admitted",
            str(go),
        ],
        "readiness": {"file": {"path": "{work_dir}/admitted"}},
    }
    second = {
        "name": "second",
        "after": ["first"],
        "restart": {"policy": "no"},
        "uses": [{"service": "mod", "pool": "slots"}],
        "command": ["sleep", "60"],
    }
    text = "schema: 2\nname: usesjob\nobservability:\n  metrics: false\nservices:\n"
    for entry in ({"name": "mod", "type": "oarbank", "options": mod}, first, second):
        text += f"  - {json.dumps(entry)}\n"
    path = tmp / "uses.yaml"
    path.write_text(text)
    return path


def srt_status(job_dir: Path, *extra: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "status", str(job_dir), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def agent_view(job_dir: Path) -> dict[str, Any]:
    (section,) = [
        s
        for s in json.loads(srt_status(job_dir, "--json"))["sections"]
        if s["plugin"].startswith("srt-oarbank")
    ]
    view: dict[str, Any] = section["data"]["mod@node0"]
    return view


def calls(data: Path, op: str) -> list[dict[str, Any]]:
    path = data / "fakemod" / "fake-state" / "svc" / "calls.jsonl"
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines()]
    return [e for e in entries if e["event"] == "begin" and e["op"] == op]


def test_uses_admits_refuses_with_the_reason_and_idles_out(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    fake = pool_bundle(bundle_factory)
    job_dir = tmp_path / "job"
    data = job_dir / "work" / "service_mod" / "data"
    procs.watch(data)
    go = tmp_path / "go"
    run = start_srt(["run", str(recipe(tmp_path, fake, go))], str(job_dir))
    try:
        admitted = job_dir / "work" / "service_first" / "admitted"
        # written by a shell redirection: there (empty) a moment before it says anything
        assert wait_until(lambda: admitted.exists() and admitted.read_text().strip(), 60), (
            run.events()
        )
        attempt = admitted.read_text().strip()
        assert attempt == "srt.job.service_first"
        # the on_demand service was started by that admission, not when its agent came up
        agent_ready = run.wait_event("ready", step="service_mod")
        starts = calls(data, "start")
        assert len(starts) == 1 and starts[0]["time"] > agent_ready["t"], starts
        # what the recipe hands the module reaches it; so does the job's cookie, so srt's
        # own sweep would still find what the module started
        start = starts[0]
        assert (start["settings"], start["tools"], start["limits"]) == (
            {"k": "{node}"},
            TOOLS,
            LIMITS,
        )
        assert processes.COOKIE_VAR in start["env_keys"]

        refused = run.wait_event("exited", 60, step="service_second")
        assert refused["code"] == 75, refused
        assert "PoolExhausted" in refused["reason"], refused
        assert "pool 'slots' exhausted" in refused["reason"], refused
        assert "sleep" not in run.log("service_second")  # refused before it ran

        view = agent_view(job_dir)
        module = view["modules"]["fakemod"]
        assert module["admissions"] == [attempt]
        assert module["pools"] == {"capacity": {"slots": 1}, "reserved": {"slots": 1}}
        assert (module["services"]["svc"]["state"], module["services"]["svc"]["users"]) == (
            "ready",
            [attempt],
        )
        text = srt_status(job_dir)
        assert "oarbank admissions:" in text
        assert "fakemod/slots: 1 of 1 token(s) held" in text
        second_row = next(line for line in text.splitlines() if line.startswith("service_second"))
        assert "failed: oarbank: admission of srt.job.service_second refused" in second_row

        go.write_text("go")
        ended = run.wait_event("exited", 30, step="service_first")
        assert ended["code"] == 0, ended
        assert wait_until(lambda: bool(calls(data, "stop")), 30), "no idle stop"
        # released when it ended, stopped once idle for idle_timeout_s (not before)
        assert calls(data, "stop")[0]["time"] >= ended["t"] - 0.5 + IDLE_S - 0.5
        assert wait_until(
            lambda: (
                agent_view(job_dir)["modules"]["fakemod"]["services"]["svc"]["state"] == "stopped"
            ),
            30,
        )
        after = agent_view(job_dir)["modules"]["fakemod"]
        assert after["admissions"] == [] and after["pools"]["reserved"] == {}
    finally:
        run.stop()
    assert_no_survivors(str(job_dir))
    assert "not running" in agent_view(job_dir)["error"]


def validate(
    tmp: Path, mod: dict[str, Any], *users: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    text = "schema: 2\nname: usesjob\nobservability:\n  metrics: false\nservices:\n"
    text += f"  - {json.dumps({'name': 'mod', 'type': 'oarbank', 'options': mod})}\n"
    for user in users:
        text += f"  - {json.dumps(user)}\n"
    path = tmp / "check.yaml"
    path.write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "srt_services", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("mod", "use", "field", "message"),
    [
        ({}, {}, "services[user].uses[0].service", "takes no admissions: set its"),
        (
            {"admissions": True},
            {"capability": "nope"},
            "services[user].uses[0].capability",
            "module fakemod has no service or probe 'nope' (it has: svc, jdk)",
        ),
        (
            {"admissions": True},
            {"capability": "othermod/svc"},
            "services[user].uses[0].capability",
            "has no service or probe 'othermod/svc'",
        ),
        (
            {"admissions": True},
            {"pool": "gpus"},
            "services[user].uses[0].pool",
            "module fakemod declares no pool 'gpus' (its services declare: slots)",
        ),
        (
            {"admissions": True},
            {"pool": "slots", "tokens": 0},
            "services[user].uses[0].tokens",
            "must be at least 1",
        ),
        (
            {"admissions": True, "timeouts": {"stop": 5}},
            {},
            "services[mod].options.timeouts",
            "applies only without admissions",
        ),
        ({"mem_budget_gb": 4}, None, "services[mod].options.mem_budget_gb", "only with admissions"),
    ],
)
def test_validate_refuses_a_use_the_module_cannot_serve(
    bundle_factory: BundleFactory,
    tmp_path: Path,
    mod: dict[str, Any],
    use: dict[str, Any] | None,
    field: str,
    message: str,
) -> None:
    entry = service_entry("svc", lifecycle="on_demand", pools=["slots"])
    probe = {"name": "jdk", "exec": ["bin/fake"]}
    fake = bundle_factory(module="fakemod", services=[entry], probes=[probe])
    options = {"bundle": str(fake.root), "service": "svc", **mod}
    users = []
    if use is not None:
        users.append(
            {
                "name": "user",
                "after": ["mod"],
                "command": ["x"],
                "uses": [{"service": "mod", **use}],
            }
        )
    out = validate(tmp_path, options, *users)
    assert out.returncode == 2, out.stdout + out.stderr
    assert field in out.stderr, out.stderr
    assert message in out.stderr, out.stderr
    assert "check.yaml:" in out.stderr  # located: file, line and column


def test_a_capability_a_pool_and_memory_become_one_admission(
    bundle_factory: BundleFactory, tmp_path: Path
) -> None:
    entry = service_entry("svc", lifecycle="on_demand", pools=["slots"])
    probe = {"name": "jdk", "exec": ["bin/fake"]}
    fake = bundle_factory(module="fakemod", services=[entry], probes=[probe])
    options = {"bundle": str(fake.root), "service": "svc", "admissions": True}
    user = {
        "name": "user",
        "after": ["mod"],
        "command": ["x", "--flag"],
        "uses": [
            {"service": "mod", "pool": "slots", "tokens": 2, "mem_gb": 1.5},
            {"service": "mod", "capability": "fakemod/jdk", "pool": "slots"},
        ],
    }
    assert validate(tmp_path, options, user).returncode == 0
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", "--json", str(tmp_path / "check.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    units = {u["name"]: u for u in json.loads(out.stdout)["units"]}
    (agent,) = units["mod"]["instances"]
    assert agent["argv"][1:3] == ["-m", "srt_oarbank.node_agent"]
    socket = agent["argv"][agent["argv"].index("--socket") + 1]
    (inst,) = units["user"]["instances"]
    assert inst["argv"][1:] == [
        "-m", "srt_oarbank.run", "--socket", socket,
        "--need", "fakemod/svc", "--need", "fakemod/jdk",
        "--pool", "fakemod/slots=3", "--mem-gb", "1.5",
        "--reason-file", f"{inst['work_dir']}/srt-exit-reason",
        "--", "x", "--flag",
    ]  # fmt: skip


def test_a_killed_user_s_admission_is_released_by_its_next_launch(
    bundle_factory: BundleFactory, procs: ProcessTracker, tmp_path: Path
) -> None:
    """SIGKILL of the wrapper (as srt's kill after the stop grace) cannot release: the
    restarted instance, under the same attempt id, releases it first and is admitted."""
    import os
    import signal

    fake = pool_bundle(bundle_factory)
    job_dir = tmp_path / "job"
    data = job_dir / "work" / "service_mod" / "data"
    procs.watch(data)
    go = tmp_path / "go"
    path = recipe(tmp_path, fake, go)
    text = path.read_text().replace(
        '"readiness"',
        '"restart": {"policy": "always", "backoff_initial_seconds": 0.2}, "readiness"',
    )
    lines = [line for line in text.splitlines() if '"name": "second"' not in line]
    path.write_text("\n".join(lines) + "\n")
    run = start_srt(["run", str(path)], str(job_dir))
    try:
        admitted = job_dir / "work" / "service_first" / "admitted"
        # ready, not merely the file there: the probe wants it non-empty, and a kill before
        # srt saw that is an exit before ready, which fails the job instead of restarting it
        run.wait_event("ready", 60, step="service_first", attempt=1)
        launched = run.wait_event("launched", step="service_first", attempt=1)
        admitted.unlink()
        os.kill(launched["pid"], signal.SIGKILL)
        run.wait_event("launched", 30, step="service_first", attempt=2)
        assert wait_until(admitted.exists, 30), run.log("service_first")
        module = agent_view(job_dir)["modules"]["fakemod"]
        assert module["admissions"] == ["srt.job.service_first"]
        assert module["pools"]["reserved"] == {"slots": 1}
    finally:
        go.write_text("go")
        run.stop()
    assert_no_survivors(str(job_dir))
