"""Two Mooncake stores on two separate local nodes at their default port (8800).

Their REST servers bind 0.0.0.0 whatever they are told, so on the machine's one network
the second store cannot start: shared mode refuses the plan, naming both. With a network
namespace per virtual node (``--local-network namespaces``, or ``auto`` on such a plan)
both run at their defaults, as on two machines: the tests below plan that, run it for
real with the real master and stores, reach each node from the host over the job's
bridge, reach the frontend on 127.0.0.1 through the orchestrator's relay, and check that
every way a job ends (a stop, kill -9 of the orchestrator then ``srt stop``, or then
``srt rm``) leaves no namespace, veth, bridge or process behind.

Traffic crosses only loopback and the namespaces the jobs make. The runtime tests skip
where namespaces cannot be made (not root).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.extend import Plan
from srt_services.testing import RecipeError, SrtError, netns
from srt_services.testing.jobs import JobRun, Jobs, run_srt, wait_for
from srt_services.testing.survivors import assert_no_survivors, survivors

MakePlan = Callable[..., Plan]
PY = sys.executable
SIZES = "{global_segment_size: 64MB, local_buffer_size: 16MB}"
REASON = netns.unavailable()
needs_netns = pytest.mark.skipif(REASON is not None, reason=f"network namespaces: {REASON}")


def recipe(frontend_port: int = 18000, stores_on: tuple[str, str] = ("prefill", "decode")) -> str:
    """A master and two stores at their defaults, each store on its role's node; the
    frontend an HTTP server on its node's address (what the relay forwards)."""
    a, b = stores_on
    frontend = [PY, "-m", "http.server", str(frontend_port), "--bind", "{node_ip}"]
    return (
        "schema: 2\n"
        "name: netns-stores\n"
        "resources: {gpus_per_node: 1}\n"
        "observability: {metrics: false}\n"
        f"frontend: {{type: sglang, port: {frontend_port}, command: {json.dumps(frontend)}}}\n"
        "roles:\n"
        '  prefill: {command: [sleep, "600"]}\n'
        '  decode: {command: [sleep, "600"]}\n'
        "services:\n"
        "  - {name: mooncake-master, type: mooncake-master}\n"
        f"  - {{name: store-a, type: mooncake-store, placement: {{node: {a}}}, options: {SIZES}}}\n"
        f"  - {{name: store-b, type: mooncake-store, placement: {{node: {b}}}, options: {SIZES}}}\n"
    )


def network(plan: Plan) -> netns.LocalNetwork:
    assert plan.local_network is not None
    return plan.local_network


# ---------------------------------------------------------------------------- planning


def test_shared_mode_refuses_the_collision_naming_both_stores_and_the_way_out(
    srt_plan: MakePlan,
) -> None:
    with pytest.raises(RecipeError) as info:
        srt_plan(recipe(), runs_here=True, local_network="shared")
    text = str(info.value)
    assert "services[store-a]" in text and "services[store-b] on node1" in text
    assert "binds 0.0.0.0:8800" in text and "--local-network namespaces" in text


def test_auto_keeps_a_single_node_job_on_loopback(srt_plan: MakePlan) -> None:
    """No collision, no namespaces: the job is planned as it always was, whatever the
    machine allows (both stores on the prefill node would collide there too, so one)."""
    single = recipe().replace("  - {name: store-b", "  # - {name: store-b")
    single = single.replace('  decode: {command: [sleep, "600"]}\n', "")
    plan = srt_plan(single, runs_here=True, local_network="auto")
    assert network(plan).mode == "shared"
    assert "no wildcard bind collides" in network(plan).why
    assert [n.ip for n in plan.nodes] == ["127.0.0.1"]
    assert network(plan).namespaces == {} and network(plan).forwards == []


def test_namespaces_asked_for_where_impossible_is_refused_before_planning(
    srt_plan: MakePlan, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without ``ip`` and ``nsenter`` (a PATH of nothing) no namespace can be made: the
    explicit request is an error saying why; ``auto`` falls back to shared and refuses the
    collision with that reason."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SrtError, match="--local-network asks for network namespaces") as info:
        srt_plan(recipe(), runs_here=True, local_network="namespaces")
    assert "ip and nsenter are not on PATH" in str(info.value)
    with pytest.raises(RecipeError) as again:
        srt_plan(recipe(), runs_here=True, local_network="auto")
    assert "separate network namespaces per virtual node would too, but ip and nsenter" in str(
        again.value
    )


@needs_netns
def test_auto_plans_each_node_on_the_bridge_and_forwards_the_frontend(srt_plan: MakePlan) -> None:
    plan = srt_plan(recipe(), runs_here=True, local_network="auto", job_dir="/jobs/netns")
    net = network(plan)
    assert net.mode == "namespaces" and "store-a, store-b" in net.why
    assert net.bridge.startswith("srt-") and net.owner == "/jobs/netns"
    addresses = [n.ip for n in plan.nodes]
    assert addresses == [net.addresses["node0"], net.addresses["node1"]]
    assert not any(a.startswith("127.") for a in addresses)
    stores = {u.name: u.instances[0] for u in plan.units if u.name.startswith("store")}
    assert [i.ports for i in stores.values()] == [[8800], [8800]]  # both at the default
    assert stores["store-b"].readiness is not None
    assert stores["store-b"].readiness.config["host"] == net.addresses["node1"]
    master = plan.discovery_env["MOONCAKE_MASTER"]
    assert master == f"{net.addresses['node0']}:8700"
    (forward,) = net.forwards
    assert forward == {
        "port": 18000,
        "node": "node0",
        "address": net.addresses["node0"],
        "unit": "frontend",
    }


def test_a_dry_run_stays_on_loopback_and_only_warns(srt_plan: MakePlan) -> None:
    plan = srt_plan(recipe(), local=True)
    assert network(plan).mode == "shared" and plan.nodes[0].ip == "127.0.0.1"
    assert any("binds 0.0.0.0:8800" in w for w in plan.warnings)


# ---------------------------------------------------------------------------- runtime


@pytest.fixture
def _needs_mooncake(mooncake: dict[str, str]) -> None:
    """The runtime tests run the real master and stores."""


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _answer(url: str) -> tuple[int, str] | None:
    """The answer once the server listens (the sglang stand-in has no readiness probe:
    until it listens, the relay closes the connection as a closed port refuses it)."""
    try:
        return _get(url)
    except (ConnectionError, urllib.error.URLError):
        return None


def _put(store: str, key: str, value: str) -> str:
    body = json.dumps({"key": key, "value": value}).encode()
    req = urllib.request.Request(
        store + "/api/put", body, {"Content-Type": "application/json"}, method="PUT"
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return str(r.read().decode())


def _serving(srt_jobs: Jobs, frontend: int, *args: str) -> tuple[JobRun, netns.LocalNetwork]:
    job = srt_jobs.start(recipe(frontend), *args)
    job.wait_event("serving", timeout=120)
    net = netns.network_of(job.job_dir)
    assert net is not None
    assert len(netns.leftovers(net)) == 5  # two namespaces, two veths, the bridge
    return job, net


@needs_netns
@pytest.mark.component
@pytest.mark.slow
@pytest.mark.usefixtures("_needs_mooncake")
def test_two_stores_at_the_default_port_run_as_on_two_machines(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    frontend = srt_free_port()
    job, net = _serving(srt_jobs, frontend)
    a, b = net.addresses["node0"], net.addresses["node1"]
    (started,) = [e for e in job.events() if e["event"] == "job_started"]
    assert started["local_network"] == "namespaces" and started["bridge"] == net.bridge
    for step in ("service_store-a", "service_store-b", "service_mooncake-master"):
        job.wait_event("ready", step=step)
    # each store in its own node's namespace, neither in the orchestrator's
    pids = {s: i["pid"] for s, i in job.state()["instances"].items()}
    spaces = {s: netns.netns_inode(p) for s, p in pids.items()}
    assert spaces["service_store-a"] != spaces["service_store-b"]
    assert spaces["service_store-a"] == spaces["service_mooncake-master"] == spaces["frontend"]
    assert netns.netns_inode(os.getpid()) not in spaces.values()
    # `srt exec` joins the instance's node: its namespace, where node1's address is its own
    inside = run_srt("exec", job.job_dir, "store-b", "--", "readlink", "/proc/self/ns/net")
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.strip() == spaces["service_store-b"]
    # both at 8800, reached from the host over the bridge: one pool through both
    assert "Store service started successfully on " + b in job.log("service_store-b")
    _put(f"http://{a}:8800", "k", "from-a")
    assert _get(f"http://{b}:8800/api/get/k") == (200, "from-a")
    # the frontend (on node0's address only) is where it always was: 127.0.0.1
    status, page = wait_for(lambda: _answer(f"http://127.0.0.1:{frontend}/"), timeout=20)
    assert status == 200 and "Directory listing" in page
    shown = run_srt("status", job.job_dir, env={"COLUMNS": "300"})
    assert f"local network: namespaces on bridge {net.bridge} {net.subnet}" in shown.stdout
    assert f"127.0.0.1:{frontend} -> node0 {a}:{frontend}" in shown.stdout
    job.stop()
    job.wait(60)
    assert "local network: namespaces (auto: wildcard binds collide" in job.stdout
    assert netns.leftovers(net) == []
    assert_no_survivors(job.job_dir)


@needs_netns
@pytest.mark.component
@pytest.mark.slow
@pytest.mark.usefixtures("_needs_mooncake")
def test_kill_9_of_the_orchestrator_then_srt_stop_leaves_nothing(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    job, net = _serving(srt_jobs, srt_free_port(), "--local-network", "namespaces")
    orch = job.state()["orchestrator"]["pid"]
    os.kill(orch, signal.SIGKILL)
    job.wait(30)
    assert job.code == -signal.SIGKILL or job.code == 128 + signal.SIGKILL
    # what it made is still there, with its services: the cleanup path is what removes it
    assert len(netns.leftovers(net)) == 5 and survivors(job.job_dir)
    stopped = run_srt("stop", job.job_dir, timeout=120)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert netns.leftovers(net) == []
    assert_no_survivors(job.job_dir)


@needs_netns
@pytest.mark.component
@pytest.mark.slow
@pytest.mark.usefixtures("_needs_mooncake")
def test_a_killed_job_whose_processes_died_too_is_cleaned_by_srt_rm(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    """Everything of the job killed (the orchestrator first, then each instance's group,
    as a machine's OOM killer might): only its network is left, which ``srt rm`` removes
    with the directory, and ``srt prune`` would, since it removes through the same path."""
    job, net = _serving(srt_jobs, srt_free_port())
    state = job.state()
    os.kill(state["orchestrator"]["pid"], signal.SIGKILL)
    job.wait(30)
    for inst in state["instances"].values():
        if inst.get("pgid"):
            try:
                os.killpg(inst["pgid"], signal.SIGKILL)
            except ProcessLookupError:
                pass
    wait_for(lambda: not survivors(job.job_dir), timeout=20)
    assert len(netns.leftovers(net)) == 5
    removed = run_srt("rm", job.job_dir, timeout=60)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert not os.path.exists(job.job_dir)
    assert netns.leftovers(net) == []
    # the directory is gone, so the fixture's survivor check has nothing to read: the
    # instances' groups are checked here (a zombie holds nothing: not counted)
    groups = {inst["pgid"] for inst in state["instances"].values() if inst.get("pgid")}
    assert len(groups) == len(state["instances"]) and not _live_in_groups(groups)


def _live_in_groups(groups: set[int]) -> list[int]:
    """PIDs of the machine's processes in one of ``groups`` that are not zombies."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in groups and fields[0] != "Z":
            found.append(int(entry))
    return found


@pytest.mark.component
def test_auto_runs_a_single_node_job_in_the_shared_network(srt_jobs: Jobs) -> None:
    job = srt_jobs.run(
        "schema: 2\n"
        "name: one-node\n"
        "observability: {metrics: false}\n"
        "frontend: {type: sglang, command: [sleep, '30']}\n"
        "roles: {agg: {command: [sleep, '30']}}\n"
        "benchmark: {type: command, command: [echo, '{head_ip}']}\n",
        timeout=60,
    )
    assert job.code == 0, job.stdout + job.stderr
    (started,) = [e for e in job.events() if e["event"] == "job_started"]
    assert started["local_network"] == "shared"
    assert job.log("benchmark").strip().endswith("127.0.0.1")
    assert "local network: shared, virtual nodes on 127.0.0.x (auto: no wildcard" in job.stdout


@needs_netns
@pytest.mark.component
@pytest.mark.usefixtures("_needs_mooncake")
def test_a_frontend_port_taken_on_the_machine_fails_the_job_before_its_first_launch(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    port = srt_free_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port))
        taken.listen()
        job = srt_jobs.start(recipe(port)).wait(60)
    assert job.code == 1, job.stdout + job.stderr
    cause = job.result()["cause"]
    assert cause["kind"] == "launcher_failed"
    assert f"cannot forward 127.0.0.1:{port} to frontend on node0" in cause["message"]
    assert not [e for e in job.events() if e["event"] == "launched"]
    net = netns.network_of(job.job_dir)
    assert net is not None and net.mode == "namespaces" and netns.leftovers(net) == []


@needs_netns
@pytest.mark.component
@pytest.mark.slow
@pytest.mark.usefixtures("_needs_mooncake")
def test_the_detached_jobs_watchdog_removes_the_network_of_a_killed_orchestrator(
    srt_jobs: Jobs, srt_free_port: Callable[[], int], tmp_path: Path
) -> None:
    recipe_path = srt_jobs.recipe(recipe(srt_free_port()))
    job_dir = str(tmp_path / "detached")
    srt_jobs.job_dirs.append(job_dir)  # the fixture's survivor and network check
    started = run_srt("run", "-d", recipe_path, "--job-dir", job_dir, timeout=120)
    assert started.returncode == 0, started.stderr
    net = netns.network_of(job_dir)
    assert net is not None and net.mode == "namespaces"

    def state() -> dict[str, object]:
        with open(os.path.join(job_dir, "state.json"), "rb") as fh:
            data: dict[str, object] = json.loads(fh.read())
            return data

    wait_for(lambda: any(e == "serving" for e in _event_names(job_dir)), timeout=120)
    orch = state()["orchestrator"]
    assert isinstance(orch, dict)
    os.kill(orch["pid"], signal.SIGKILL)
    wait_for(lambda: state()["status"] == "stopped", timeout=60)
    wait_for(lambda: not netns.leftovers(net), timeout=30)
    assert "srt run -d watchdog" in str(state()["stopped_by"])
    assert_no_survivors(job_dir)


def _event_names(job_dir: str) -> list[str]:
    try:
        with open(os.path.join(job_dir, "events.jsonl")) as fh:
            return [json.loads(line)["event"] for line in fh if line.strip()]
    except (OSError, ValueError):
        return []


@needs_netns
@pytest.mark.component
@pytest.mark.slow
@pytest.mark.usefixtures("_needs_mooncake")
def test_a_rerun_in_the_directory_of_a_killed_job_takes_its_network_over(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    """The names come from the job directory, so a second ``srt run`` there needs the
    first one's objects gone: the take-over stops the leftovers and removes them first."""
    port = srt_free_port()
    first, net = _serving(srt_jobs, port)
    os.kill(first.state()["orchestrator"]["pid"], signal.SIGKILL)
    first.wait(30)
    assert len(netns.leftovers(net)) == 5
    second = srt_jobs.start(recipe(port), job_dir=first.job_dir)
    second.wait_event("serving", timeout=120)
    again = netns.network_of(first.job_dir)
    assert again is not None and again.bridge == net.bridge
    assert len(netns.leftovers(again)) == 5
    status, _ = wait_for(lambda: _answer(f"http://127.0.0.1:{port}/"), timeout=20)
    assert status == 200
    second.stop()
    second.wait(60)
    assert netns.leftovers(again) == []
    assert_no_survivors(first.job_dir)
