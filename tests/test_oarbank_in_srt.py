"""srt-oarbank inside srt: the ``oarbank`` kind, the ``oarbank-probe`` probe, ``srt oarbank
expose`` and ``srt oarbank check``, with a real etcd run through the protocol end to end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import textwrap
import urllib.request
from pathlib import Path

import pytest
from srt_services.launch import process
from srt_services.testing.jobs import free_port, run_recipe, start_srt
from srt_services.testing.jobs import run_srt as srt
from srt_services.testing.survivors import assert_no_survivors

pytestmark = pytest.mark.skipif(
    shutil.which("etcd") is None, reason="needs etcd (apt-get install etcd-server)"
)

HERE = Path(__file__).resolve().parent  # cross-package: srt-oarbank with srt-etcd


def op_env(data: Path) -> dict[str, str]:
    """The environment the protocol gives an exposed op of srt-etcd's service on node-a,
    its module data directory ``data`` made here."""
    data.mkdir()
    return {
        "PATH": os.environ["PATH"],
        "OARBANK_MODULE_DATA": str(data),
        "OARBANK_SERVICE": "etcd",
        "OARBANK_NODE_ID": "node-a",
        "OARBANK_MODULE": "srt-etcd",
    }


@pytest.fixture
def etcd_bundle(tmp_path: Path) -> tuple[Path, int]:
    client, peer = free_port(), free_port()
    recipe = tmp_path / "etcd.yaml"
    recipe.write_text(
        "schema: 2\nname: expose\nobservability:\n  metrics: false\nservices:\n"
        f"  - {{name: etcd, type: etcd, options: {{client_port: {client}, peer_port: {peer}}}}}\n"
    )
    out = srt("oarbank", "expose", str(recipe), "--service", "etcd", "-o", str(tmp_path / "bundle"))
    assert out.returncode == 0, out.stderr
    return tmp_path / "bundle", client


def _etcd_pids(bundle_data: Path) -> list[int]:
    found = []
    for state in bundle_data.rglob("srt-exposed/etcd/state.json"):
        pid = json.loads(state.read_text())["pid"]
        found.append(pid)
    return found


def test_exposed_etcd_passes_the_conformance_runner(
    etcd_bundle: tuple[Path, int], tmp_path: Path
) -> None:
    bundle, _ = etcd_bundle
    junit = tmp_path / "junit.xml"
    out = srt(
        "oarbank",
        "check",
        "--bundle",
        str(bundle),
        "--data",
        str(tmp_path / "data"),
        "--service",
        "etcd",
        "--junit",
        str(junit),
        "--tap",
        str(bundle / "bin" / "etcd"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "not ok" not in out.stdout
    assert out.stdout.count("\nok ") + out.stdout.startswith("ok ") >= 20
    assert 'failures="0"' in junit.read_text()
    assert not [p for p in _etcd_pids(tmp_path / "data") if process.alive(p)]


def test_exposed_ops_are_idempotent_and_label_what_they_own(
    etcd_bundle: tuple[Path, int], tmp_path: Path
) -> None:
    bundle, client = etcd_bundle
    data = tmp_path / "data"
    env = op_env(data)

    def op(*args: str) -> tuple[int, dict[str, object]]:
        p = subprocess.run(
            [str(bundle / "bin" / "etcd"), *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=bundle,
            check=False,
        )
        return p.returncode, json.loads(p.stdout)

    code, started = op("start")
    assert code == 0 and started["changed"] is True
    code, again = op("start")
    assert code == 0 and again["changed"] is False and again["pid"] == started["pid"]
    code, owned = op("list_owned")
    (obj,) = owned["objects"]  # type: ignore[misc]
    assert obj["labels"]["oarbank.node"] == "node-a" and obj["labels"]["oarbank.service"] == "etcd"
    assert obj["labels"]["oarbank.attempt_id"]
    code, refused = op("destroy", obj["id"])
    assert code != 0 and refused["code"] == 12
    code, stopped = op("stop")
    assert code == 0 and stopped["changed"] is True
    code, again = op("stop")
    assert code == 0 and again["changed"] is False
    assert not process.alive(int(started["pid"]))  # type: ignore[call-overload]
    assert client > 0


def test_oarbank_kind_runs_etcd_through_the_protocol(
    etcd_bundle: tuple[Path, int], tmp_path: Path
) -> None:
    bundle, client = etcd_bundle
    check = (
        "import base64,json,urllib.request\n"
        f"u='http://127.0.0.1:{client}/v3/kv/'\n"
        "b=lambda s: base64.b64encode(s.encode()).decode()\n"
        "post=lambda p,d: json.load(urllib.request.urlopen(urllib.request.Request(u+p, json.dumps(d).encode()), timeout=5))\n"
        "post('put', {'key': b('k'), 'value': b('v')})\n"
        "r=post('range', {'key': b('k')})\n"
        "assert base64.b64decode(r['kvs'][0]['value']) == b'v'\n"
        "import os\n"
        "st=os.path.join(os.environ['SRT_JOB_DIR'],'work/service_kv/data/srt-exposed/etcd/state.json')\n"
        "print('etcd pid', json.load(open(st))['pid'])\n"
        "print('etcd via protocol ok')\n"
    )
    recipe = tmp_path / "job.yaml"
    recipe.write_text(
        textwrap.dedent(
            f"""
            schema: 2
            name: viaproto
            observability:
              metrics: false
            services:
              - name: kv
                type: oarbank
                options: {{bundle: "{bundle}", service: etcd, ready_timeout_seconds: 60}}
              - name: client
                terminal: true
                command: [python3, -c, {json.dumps(check)}]
            """
        )
    )
    job_dir = tmp_path / "job"
    run = run_recipe(str(recipe), str(job_dir), timeout=120)
    assert run.code == 0, run.stdout + run.stderr
    assert "etcd via protocol ok" in run.log("service_client")
    ready = [e for e in run.events() if e["event"] == "ready" and e["step"] == "service_kv"]
    assert ready, "gated on the protocol's ready"
    status = json.loads((job_dir / "work" / "service_kv" / "status.json").read_text())
    assert status["service"] == "etcd"
    pid = int(run.log("service_client").split("etcd pid ")[1].split()[0])
    assert not process.alive(pid), "the agent stopped etcd through the protocol"
    stops = job_dir / "work" / "service_kv" / "data"
    assert stops.exists()
    assert_no_survivors(str(job_dir))


def test_agent_killed_fails_a_critical_oarbank_service_and_nothing_leaks(
    etcd_bundle: tuple[Path, int], tmp_path: Path
) -> None:
    bundle, _ = etcd_bundle
    recipe = tmp_path / "job.yaml"
    recipe.write_text(
        f"schema: 2\nname: crit\nobservability:\n  metrics: false\nservices:\n"
        f"  - {{name: kv, type: oarbank, options: {{bundle: '{bundle}', service: etcd}}}}\n"
        "  - {name: hold, command: [sleep, '1000']}\n"
    )
    job_dir = tmp_path / "job"
    run = start_srt(["run", str(recipe)], str(job_dir))
    run.wait_event("serving", timeout=60)
    agent = run.state()["instances"]["service_kv"]["pid"]
    etcd = _etcd_pids(job_dir / "work" / "service_kv" / "data")
    assert etcd and all(process.alive(p) for p in etcd)
    os.kill(agent, signal.SIGKILL)
    run.wait(60)
    assert run.code == 1
    assert run.result()["cause"]["unit"] == "kv"
    assert not [p for p in etcd if process.alive(p)], (
        "the orphaned service was still stopped at teardown"
    )
    assert_no_survivors(str(job_dir))


def test_oarbank_probe_gates_a_service_on_a_module_probe(tmp_path: Path) -> None:
    bundle = tmp_path / "probes"
    (bundle / "bin").mkdir(parents=True)
    for name, health in (("present", "healthy"), ("absent", "unhealthy")):
        exe = bundle / "bin" / name
        exe.write_text(f'#!/bin/sh\necho \'{{"health": "{health}"}}\'\n')
        exe.chmod(0o755)
    (bundle / "oarbank-module.json").write_text(
        json.dumps(
            {
                "name": "tools",
                "version": "1",
                "protocol": 1,
                "probes": [
                    {"name": "present", "exec": ["bin/present"]},
                    {"name": "absent", "exec": ["bin/absent"]},
                ],
            }
        )
    )

    def job(probe: str) -> tuple[int | None, str]:
        recipe = tmp_path / f"{probe}.yaml"
        recipe.write_text(
            "schema: 2\nname: gated\nobservability:\n  metrics: false\nservices:\n"
            "  - name: app\n    command: [sleep, '1000']\n"
            f"    readiness: {{oarbank-probe: {{bundle: '{bundle}', probe: {probe}}}, timeout_seconds: 2}}\n"
            "  - {name: end, terminal: true, command: [sleep, '0.2']}\n"
        )
        job_dir = tmp_path / f"job-{probe}"
        run = run_recipe(str(recipe), str(job_dir), timeout=60)
        assert_no_survivors(str(job_dir))
        return run.code, run.stderr

    code, err = job("present")
    assert code == 0, err
    code, err = job("absent")
    assert code == 1
    assert "oarbank probe absent" in err and "not ready within 2s" in err
    assert HERE.exists()


def test_oarbank_kind_validation(tmp_path: Path) -> None:
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(
        "schema: 2\nname: bad\nservices:\n"
        "  - {name: a, type: oarbank, options: {bundle: relative/dir, service: x}}\n"
        f"  - {{name: b, type: oarbank, options: {{bundle: '{tmp_path}', service: x, timeouts: {{bogus: 1}}}}}}\n"
        "  - {name: c, type: oarbank, command: [x], options: {bundle: /nonexistent, service: x}}\n"
    )
    out = srt("validate", str(recipe))
    assert out.returncode == 2
    err = out.stderr
    assert "bad.yaml:4:" in err and "services[a].options.bundle: must be an absolute path" in err
    assert "services[b].options.timeouts.bogus: is not an operation" in err
    assert "services[b].options: cannot use module bundle" in err
    assert "services[c].command: type 'oarbank' builds its own command" in err
    assert urllib.request is not None


def test_P10_concurrent_starts_of_the_exposed_etcd_leave_one_server(
    etcd_bundle: tuple[Path, int], tmp_path: Path
) -> None:
    import psutil

    bundle, client = etcd_bundle
    data = tmp_path / "data"
    env = op_env(data)
    exe = str(bundle / "bin" / "etcd")
    racers = [
        subprocess.Popen(
            [exe, "start"], env=env, cwd=bundle, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(6)
    ]
    answers = [json.loads(p.communicate(timeout=120)[0]) for p in racers]
    try:
        assert all(p.returncode == 0 for p in racers), answers
        assert len({a["pid"] for a in answers}) == 1, answers
        assert sorted(a["changed"] for a in answers) == [False] * 5 + [True]
        (recorded,) = _etcd_pids(data)
        assert answers[0]["pid"] == recorded
        servers = [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if str(data) in " ".join(p.info["cmdline"] or [])
            and "etcd" in (p.info["cmdline"] or [""])[0]
        ]
        assert servers == [recorded], "more than the recorded etcd runs"
    finally:
        subprocess.run([exe, "stop"], env=env, cwd=bundle, capture_output=True, check=False)
        for p in psutil.process_iter(["cmdline"]):  # a failed run's extra servers
            if str(data) in " ".join(p.info["cmdline"] or []):
                p.kill()
    assert not process.alive(recorded)
    assert client > 0
