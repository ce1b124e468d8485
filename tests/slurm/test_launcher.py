"""The slurm launcher against a real Slurm cluster (fault matrix S01-S06 and end-to-end runs).

Every test submits with ``srt apply`` (sbatch → the orchestrator as the batch shell →
one ``srun --overlap`` step per instance) on the 3-node netns cluster, where each node has
its own IP, and ends by proving nothing of the job survived: neither a process carrying
the job's SLURM_JOB_ID nor one carrying its srt cookie.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services.launch import process

pytestmark = pytest.mark.slurm


@pytest.fixture
def cluster(slurm_cluster_3: Any) -> Any:
    return slurm_cluster_3


def srt(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


# --------------------------------------------------------------------------- end to end


def test_services_on_different_nodes_reach_each_other_by_node_ip(
    submit: Any, cluster: Any, tmp_path: Path
) -> None:
    out = tmp_path / "answers"
    job = submit(
        f"""
        schema: 2
        name: e2e
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: web
            nodes: 3
            command: [python3, -m, http.server, "9071", --bind, "{{node_ip}}"]
            readiness: {{http: {{port: 9071, path: /}}}}
          - name: client
            terminal: true
            command: [bash, -c, "for ip in $(echo {{pool_ips}} | tr , ' '); do echo $(hostname) $ip $(python3 -c 'import sys,urllib.request; print(urllib.request.urlopen(sys.argv[1]).status)' http://$ip:9071/) >> {out}; done"]
            placement: {{pool: web}}
        """
    )
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert job.result()["exit_code"] == 0
    lines = out.read_text().split("\n")
    answers = sorted(line.split()[1:] for line in lines if line)
    assert answers == sorted([ip, "200"] for ip in cluster.node_ips.values() for _ in range(3))
    hosts = {line.split()[0] for line in lines if line}
    assert hosts == set(cluster.nodes), "a client ran on every pool node"
    launched = {e["node"] for e in job.events("launched", unit="web")}
    assert launched == set(cluster.nodes)


def test_pool_and_per_worker_services(submit: Any, cluster: Any, tmp_path: Path) -> None:
    report = tmp_path / "report"
    job = submit(
        f"""
        schema: 2
        name: shapes
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        resources: {{gpus_per_node: 8}}
        frontend:
          type: sglang
          port: 9072
          command: [python3, -m, http.server, "9072", --bind, "{{node_ip}}"]
          readiness: {{http: {{path: /}}}}
        roles:
          agg:
            workers: 2
            gpus_per_worker: 4
            port: 9100
            command: [python3, -m, http.server, "{{worker_port}}", --bind, "{{node_ip}}"]
            readiness: {{tcp: {{}}}}
        benchmark:
          type: command
          command: [bash, -c, "sleep 0.5; echo done"]
        services:
          - name: train
            nodes: 2
            command: [bash, -c, "echo pool $(hostname) {{index}} {{pool_node_count}} {{pool_ip}} >> {report}; sleep 1000"]
          - name: sidecar
            placement: {{node: agg, per: worker}}
            command: [bash, -c, "echo worker $(hostname) {{worker_index}} $CUDA_VISIBLE_DEVICES >> {report}; echo ready; sleep 1000"]
            readiness: {{log: {{pattern: ready}}}}
        """
    )
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert job.result()["exit_code"] == 0
    lines = sorted(report.read_text().splitlines())
    ips = cluster.node_ips
    assert [line for line in lines if line.startswith("pool")] == [
        f"pool n2 0 2 {ips['n2']}",
        f"pool n3 1 2 {ips['n2']}",
    ]
    assert [line for line in lines if line.startswith("worker")] == [
        "worker n1 0 0,1,2,3",
        "worker n1 1 4,5,6,7",
    ]
    steps = {e["step"] for e in job.events("launched")}
    assert {
        "service_sidecar_agg_0_n1",
        "service_sidecar_agg_1_n1",
        "service_train_n2",
        "service_train_n3",
    } <= steps


def test_env_and_preamble_quoting(submit: Any, tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    tricky = {
        "COMMAS": "a,b,c=d",
        "QUOTES": 'it\'s "quoted"',
        "SPACES": "  lead and trail  ",
        "DOLLAR": "$HOME ${PATH} $(id) `id`",
        "NEWLINES": "one\ntwo\n",
    }
    keys = sorted([*tricky, "FROM_PREAMBLE"])
    code = f"import os,json; json.dump({{k: os.environ.get(k) for k in {keys!r}}}, open({str(dump)!r}, 'w'))"
    recipe = {
        "schema": 2,
        "observability": {"metrics": False},
        "name": "quoting",
        "slurm": {"signal_before_end_seconds": 0},
        "services": [
            {
                "name": "show",
                "terminal": True,
                "preamble": 'export FROM_PREAMBLE="it\'s \\"fine\\" $((1+1))"\n',
                "command": ["python3", "-c", code, "arg with 'quotes' and $dollar"],
                "env": tricky,
            }
        ],
    }
    job = submit(json.dumps(recipe))
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    got = json.loads(dump.read_text())
    for k, v in tricky.items():
        assert got[k] == v, k
    assert got["FROM_PREAMBLE"] == 'it\'s "fine" 2'


def test_a_job_directory_with_blanks_and_quotes_runs(submit: Any) -> None:
    # sbatch splits an unquoted directive on blanks ("invalid directive"): srt quotes it
    recipe = {
        "schema": 2,
        "observability": {"metrics": False},
        "name": "blanks",
        "slurm": {"signal_before_end_seconds": 0},
        "services": [{"name": "show", "terminal": True, "command": ["echo", "hello", "there"]}],
    }
    job = submit(json.dumps(recipe), name="my job's  dir")
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert "job blanks finished" in job.sbatch_log()
    assert "hello there" in (job.job_dir / "logs" / "service_show.out").read_text()


# --------------------------------------------------------------------------- fault matrix


def _trap(name: str, marker: Path) -> str:
    return f"trap 'echo {name} $(date +%s.%N) >> {marker}; exit 0' TERM; echo up; while true; do sleep 0.05; done"


def test_S01_scancel_of_the_job_stops_everything_inside_killwait(
    submit: Any, shell: Any, cluster: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: s01
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: a
            nodes: 2
            command: [bash, -c, "{_trap("a-{index}", marker)}"]
            readiness: {{log: {{pattern: up}}}}
          - name: b
            nodes: 1
            command: [bash, -c, "{_trap("b", marker)}"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    job.wait_event("serving")
    t0 = time.monotonic()
    shell.run("scancel", job.job_id)
    state = job.wait_done()
    elapsed = time.monotonic() - t0
    assert state == "CANCELLED"
    assert elapsed < cluster.kill_wait + 3, (
        f"teardown took {elapsed:.1f}s, KillWait is {cluster.kill_wait}s"
    )
    times = [float(line.split()[1]) for line in marker.read_text().splitlines()]
    assert len(times) == 3
    assert max(times) - min(times) < 1.0, "every step got SIGTERM at (nearly) the same time"
    result = job.result()
    assert result["cause"]["kind"] == "signal" and result["cause"]["signal"] == "SIGTERM"


def test_S02_graceful_step_stop_then_escalation(submit: Any, tmp_path: Path) -> None:
    flushed = tmp_path / "flushed"
    job = submit(
        f"""
        schema: 2
        name: s02
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: polite
            nodes: 1
            command: [bash, -c, "trap 'sleep 0.3; echo flushed > {flushed}; exit 0' TERM; echo up; while true; do sleep 0.05; done"]
            readiness: {{log: {{pattern: up}}}}
          - name: deaf
            nodes: 1
            command: [bash, -c, "trap '' TERM; echo up; while true; do sleep 0.05; done"]
            readiness: {{log: {{pattern: up}}}}
          - name: end
            terminal: true
            command: [bash, -c, "sleep 0.5"]
        """
    )
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert flushed.read_text().strip() == "flushed", "TERM reached the task and srun waited for it"
    polite = job.events("exited", step="service_polite")[0]
    assert polite["code"] == 0, (
        "the srun client was not signalled (that would have killed the task)"
    )
    deaf = job.events("exited", step="service_deaf")[0]
    assert deaf["code"] == 137
    assert job.events("escalated", step="service_deaf")


def test_S03_time_limit_with_an_early_signal(submit: Any, tmp_path: Path) -> None:
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: s03
        observability:
          metrics: false
        slurm: {{time: "1", signal_before_end_seconds: 52}}
        services:
          - name: a
            nodes: 2
            command: [bash, -c, "{_trap("a", marker)}"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    job.wait_event("serving")
    started = time.time()
    state = job.wait_done(timeout=120)
    assert state != "TIMEOUT", f"the job must end on its own before the limit\n{job.sbatch_log()}"
    assert time.time() - started < 50
    result = job.result()
    assert result["cause"]["kind"] == "signal" and result["exit_code"] == 143
    assert len(marker.read_text().splitlines()) == 2


def test_S04_orchestrator_killed_leaves_nothing(
    submit: Any, shell: Any, cluster: Any, tmp_path: Path
) -> None:
    job = submit(
        """
        schema: 2
        name: s04
        observability:
          metrics: false
        slurm: {signal_before_end_seconds: 0}
        services:
          - name: a
            nodes: 3
            command: [bash, -c, "setsid sleep 1000 & echo up; sleep 1000"]
            readiness: {log: {pattern: up}}
        """
    )
    job.wait_event("serving")
    os.kill(job.srt_state().orchestrator.pid, signal.SIGKILL)
    job.wait_done()
    job.assert_nothing_left()
    env = cluster.env()
    stopped = srt("stop", str(job.job_dir), env=env)
    assert stopped.returncode == 0, stopped.stderr
    status = srt("status", str(job.job_dir), "--json", env=env)
    data = json.loads(status.stdout)
    assert not any(r["running"] for r in data["instances"])


def test_S05_leftover_of_a_dead_job_is_reaped_a_stranger_is_named(
    submit: Any, cluster: Any, tmp_path: Path
) -> None:
    ns = f"/run/netns/{cluster.name}-n2"
    ip = cluster.node_ips["n2"]
    server = f"import socket,time; s=socket.socket(); s.bind(({ip!r}, 9073)); s.listen(); time.sleep(1000)"
    leftover = subprocess.Popen(
        ["nsenter", f"--net={ns}", "python3", "-c", server],
        env={
            "PATH": os.environ["PATH"],
            "SRT_JOB_COOKIE": "0" * 32,
            "SRT_INSTANCE": "service_old",
            "SLURM_JOB_ID": "1",
        },
        start_new_session=True,
    )
    stranger = None
    try:
        time.sleep(0.5)
        recipe = """
            schema: 2
            name: s05
            observability:
              metrics: false
            slurm: {signal_before_end_seconds: 0}
            services:
              - name: pad
                nodes: 1
                command: [sleep, "1000"]
              - name: web
                nodes: 1
                command: [python3, -m, http.server, "9073", --bind, "{node_ip}"]
                readiness: {port: 9073}
              - name: end
                terminal: true
                command: [bash, -c, "sleep 0.3"]
            """
        job = submit(recipe, name="reap")
        assert job.wait_done() == "COMPLETED", job.sbatch_log()
        reaped = job.events("reaped_leftover", unit="web")
        assert reaped and f"pid {leftover.pid}" in reaped[0]["detail"]
        assert leftover.wait(10) == -9
        stranger = subprocess.Popen(
            ["nsenter", f"--net={ns}", "python3", "-c", server], start_new_session=True
        )
        time.sleep(0.5)
        job = submit(recipe, name="stranger")
        job.wait_done()
        result = job.result()
        assert result["exit_code"] == 1
        assert result["cause"]["kind"] == "port_in_use"
        assert f"pid {stranger.pid}" in result["cause"]["message"]
        assert stranger.poll() is None, "a foreign process is never killed"
    finally:
        for p in (leftover, stranger):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


def test_S06_a_failed_node_fails_its_critical_service_and_the_rest_stops(
    submit: Any, shell: Any, cluster: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "term"
    job = submit(
        f"""
        schema: 2
        name: s06
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: others
            nodes: 2
            command: [bash, -c, "{_trap("others", marker)}"]
            readiness: {{log: {{pattern: up}}}}
          - name: store
            nodes: 1
            critical: true
            command: [bash, -c, "echo up; sleep 1000"]
            readiness: {{log: {{pattern: up}}}}
        """
    )
    job.wait_event("serving")
    node = job.events("launched", unit="store")[0]["node"]
    try:
        shell.run("scontrol", "update", f"nodename={node}", "state=down", "reason=srt-test")
        job.wait_done()
    finally:
        shell.run("scontrol", "update", f"nodename={node}", "state=resume", check=False)
    cause = job.result()["cause"]
    assert (
        cause["kind"] == "critical_service_exit"
        and cause["unit"] == "store"
        and cause["node"] == node
    )
    assert "Node failure" in job.log("service_store")
    assert len(marker.read_text().splitlines()) == 2, "the other nodes' services were stopped"


FLEET_PLUGIN = """
from typing import Any, ClassVar

from srt_services.extend import DefaultProbe, ServiceKind, hookimpl


class FleetKind(ServiceKind):
    name: ClassVar[str] = "fleet-test"
    summary: ClassVar[str] = "ready per instance, then when <job dir>/formed exists"
    requires_command: ClassVar[bool] = True
    default_readiness_timeout: ClassVar[float] = 3.0
    default_readiness_interval: ClassVar[float] = 0.1

    def fleet_readiness(self, spec: Any, options: Any, instances: Any) -> DefaultProbe:
        return DefaultProbe("file", {"path": "formed"})


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    return [FleetKind]
"""


def test_a_fleet_that_never_forms_fails_as_a_readiness_timeout_not_as_a_members_exit(
    submit: Any, tmp_path: Path
) -> None:
    """The gate stops the members when it gives up; srun reports their exits while the
    stop is still under way, and the job's cause must stay the gate's, naming its probe."""
    from srt_services.testing.jobs import plugin_env

    env = plugin_env(
        tmp_path / "site", "srt-fleettest", {"fleettest_plugin": FLEET_PLUGIN}, "fleettest_plugin"
    )
    # sbatch gets a scrubbed environment: the batch shell (the orchestrator) is told where
    # the test plugin is through the script itself
    site = env["PYTHONPATH"].split(os.pathsep)[0]
    job = submit(
        f"""
        schema: 2
        name: fleet
        slurm: {{signal_before_end_seconds: 0, sbatch_extra: ["--export=ALL,PYTHONPATH={site}"]}}
        services:
          - name: cluster
            type: fleet-test
            nodes: 2
            critical: true
            command: [bash, -c, "echo joined; sleep 1000"]
            readiness: {{log: {{pattern: joined}}}}
        benchmark: {{type: command, command: [bash, -c, "exit 0"]}}
        """,
        extra_env=env,
    )
    job.wait_done()
    cause = job.result()["cause"]
    assert (cause["kind"], cause["unit"]) == ("readiness_timeout", "cluster"), cause
    assert "did not form within 3s" in cause["message"]
    assert "formed does not exist yet" in cause["message"]
    assert not job.events("launched", unit="benchmark")


# --------------------------------------------------------------------------- rendering (no cluster needed)


def test_container_flags_and_site_aliases_in_srun_lines(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(
        textwrap.dedent(
            """
            [containers]
            aliases = {mooncake = "registry.example/mooncake:0.3"}
            mounts = ["/models:/models"]
            [slurm]
            srun_extra = ["--mpi=none"]
            """
        )
    )
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        textwrap.dedent(
            """
            schema: 2
            name: ctr
            observability:
              metrics: false
            services:
              - name: store
                container: mooncake
                cpus_per_task: 8
                cpu_bind: none
                srun_options: {exclusive: "", gres: "gpu:1"}
                command: [python3, -m, mooncake.mooncake_store_service]
            """
        )
    )
    env = dict(os.environ, SRT_SITE_CONFIG=str(site))
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "dry-run", str(recipe), "--srun"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    line = next(
        line for line in out.stdout.splitlines() if line.strip().startswith("service_store:")
    )
    argv = shlex.split(line.split(":", 1)[1])
    assert argv[:2] == ["srun", "--jobid=<job_id>"]
    for flag in (
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--nodelist=node0",
        "--job-name=service_store",
        "--container-image=registry.example/mooncake:0.3",
        "--no-container-entrypoint",
        "--no-container-mount-home",
        "--cpus-per-task=8",
        "--cpu-bind=none",
        "--exclusive",
        "--gres=gpu:1",
        "--mpi=none",
        "--export=ALL",
    ):
        assert flag in argv, flag
    mounts = next(a for a in argv if a.startswith("--container-mounts="))
    assert "/models:/models" in mounts and "<job_dir>:<job_dir>" in mounts
    assert argv[-3:] == ["python3", "-m", "mooncake.mooncake_store_service"]


def test_render_writes_the_script_without_submitting(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "schema: 2\nname: rend\nobservability:\n  metrics: false\nslurm: {partition: gpu, account: ml, time: '02:00:00', sbatch_extra: ['--exclusive']}\n"
        "services:\n  - {name: a, nodes: 2, command: [sleep, '1']}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "render", str(recipe), "-o", str(tmp_path / "job")],
        capture_output=True,
        text=True,
        check=True,
    )
    script = Path(out.stdout.strip()).read_text()
    for line in (
        "#SBATCH --nodes=2",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=ml",
        "#SBATCH --time=02:00:00",
        "#SBATCH --exclusive",
        "#SBATCH --signal=B:TERM@60",
        "#SBATCH --no-kill",
    ):
        assert line in script
    assert "--launcher slurm" in script and script.splitlines()[-1].startswith("exec ")
    assert not (tmp_path / "job" / "job.json").exists()
    assert process.alive(os.getpid())


# --------------------------------------------------------------------------- demo and builds


def test_the_local_demo_runs_on_the_cluster(submit: Any) -> None:
    """examples/local-demo.yaml as is: prefill and decode on different nodes, reached by IP."""
    job = submit(Path(__file__).resolve().parents[2] / "examples" / "local-demo.yaml", "demo")
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert job.result()["exit_code"] == 0
    assert "all 64 answers correct" in job.log("benchmark")
    nodes = {e["step"]: e["node"] for e in job.events("launched")}
    assert nodes["prefill_0"] != nodes["decode_0"]
    job.assert_nothing_left()


def _tagged_repo(tmp_path: Path) -> tuple[Path, str]:
    """A bare repository with tag v1 and a branch ``feature``; returns (path, v1's commit)."""
    work = tmp_path / "work"
    work.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    subprocess.run([*git, "init", "-q"], cwd=work, check=True)
    (work / "serve.sh").write_text("echo serving from $(pwd) on $(hostname): $(cat built)\n")
    subprocess.run([*git, "add", "."], cwd=work, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=work, check=True)
    subprocess.run([*git, "tag", "v1"], cwd=work, check=True)
    subprocess.run([*git, "branch", "feature"], cwd=work, check=True)
    sha = subprocess.run(
        [*git, "rev-parse", "HEAD"], cwd=work, check=True, capture_output=True, text=True
    ).stdout.strip()
    bare = tmp_path / "repo.git"
    subprocess.run([*git, "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare, sha


def _build_recipe(bare: Path, out: Path, scope: str) -> str:
    return f"""
        schema: 2
        name: built
        observability:
          metrics: false
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: app
            nodes: 2
            source: {{git: "{bare}", rev: v1}}
            build_scope: {scope}
            build_command: [bash, -c, "echo ok-$(git rev-parse --short HEAD)-$(hostname) > built"]
            command: [bash, -c, "bash serve.sh >> {out}; sleep 1000"]
          - name: end
            terminal: true
            command: [bash, -c, "while [ $(wc -l < {out} 2>/dev/null || echo 0) -lt 2 ]; do sleep 0.1; done"]
        """


def test_source_build_on_every_node_of_a_multi_node_service(submit: Any, tmp_path: Path) -> None:
    """build_scope: node (the default): each node clones and builds into its own
    node-local checkout, which the Slurm launcher removes on every node at the end."""
    bare, sha = _tagged_repo(tmp_path)
    out = tmp_path / "served"
    job = submit(_build_recipe(bare, out, "node"))
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    lines = sorted(out.read_text().splitlines())
    assert len(lines) == 2
    local = job.node_local()
    for line, node in zip(lines, ("n1", "n2"), strict=True):
        # served on its node, from that node's own checkout, built there
        assert line == (f"serving from {local}/src/app/{node} on {node}: ok-{sha[:7]}-{node}"), line
    builds = job.events("build_started", unit="app")
    assert sorted(e["node"] for e in builds) == ["n1", "n2"]
    assert {e["commit"] for e in job.events("checkout_done", unit="app")} == {sha}
    assert not os.path.exists(local), "the node-local checkouts outlived the job"
    staged = (job.job_dir / "recipe.yaml").read_text()
    assert f"sha: {sha}" in staged, "srt apply pinned v1 to its commit"


def test_source_build_shared_once_in_the_job_directory(submit: Any, tmp_path: Path) -> None:
    bare, sha = _tagged_repo(tmp_path)
    out = tmp_path / "served"
    job = submit(_build_recipe(bare, out, "shared"))
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    lines = sorted(out.read_text().splitlines())
    assert len(lines) == 2
    assert {line.split(" on ")[1].split(":")[0] for line in lines} == {"n1", "n2"}
    built_on = {line.rsplit("-", 1)[1] for line in lines}
    assert len(built_on) == 1, "one build, in the shared job directory, serves both nodes"
    assert all(f"from {job.job_dir}/src/app on" in line for line in lines)
    assert len(job.events("build_started", unit="app")) == 1
    assert [e["commit"] for e in job.events("checkout_done", unit="app")] == [sha]
    pins = json.loads((job.job_dir / "job.json").read_text())
    assert pins["job_id"] == job.job_id


def test_apply_refuses_a_rev_that_is_a_branch_before_anything_is_written(
    cluster: Any, tmp_path: Path
) -> None:
    bare, _ = _tagged_repo(tmp_path)
    recipe = tmp_path / "branch.yaml"
    recipe.write_text(
        textwrap.dedent(
            f"""
            schema: 2
            name: branchy
            services:
              - name: app
                source:
                  git: "{bare}"
                  rev: feature
                build_command: [make]
                command: [sleep, "1"]
            """
        )
    )
    job_dir = tmp_path / "branchy-dir"
    out = srt("apply", str(recipe), "-o", str(job_dir), env=cluster.env())
    assert out.returncode == 2, out.stderr
    assert f"{recipe}:8:7: services[app].source.rev: cannot be pinned to a commit:" in out.stderr
    assert "'feature' is a branch of" in out.stderr
    assert not job_dir.exists(), "nothing staged, nothing submitted"


def test_node_local_state_is_removed_on_every_node_at_the_end(submit: Any, tmp_path: Path) -> None:
    seen = tmp_path / "seen"
    job = submit(
        f"""
        schema: 2
        name: scratch
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: wal
            nodes: 2
            command: [bash, -c, 'echo x > {{local_dir}}/wal && echo $(hostname) {{local_dir}} >> {seen}; sleep 1000']
          - name: end
            terminal: true
            command: [bash, -c, "while [ $(wc -l < {seen} 2>/dev/null || echo 0) -lt 2 ]; do sleep 0.1; done"]
        """
    )
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    lines = sorted(seen.read_text().splitlines())
    root = job.node_local()
    assert lines == [f"n1 {root}/service_wal_n1", f"n2 {root}/service_wal_n2"]
    assert not os.path.exists(root), "the Slurm launcher left node-local state behind"


def test_slurm_tmpdir_is_the_node_local_root_when_the_job_has_one(
    submit: Any, tmp_path: Path
) -> None:
    """Sites that give each job a node-local $SLURM_TMPDIR get {local_dir} under it (a
    site sets it with a TaskProlog or a job_container plugin; here `--export` hands it to
    the batch step, where the orchestrator makes the plan)."""
    tmpdir = tmp_path / "slurm-tmpdir"
    tmpdir.mkdir()
    tmpdir.chmod(0o777)
    seen = tmp_path / "seen"
    job = submit(
        f"""
        schema: 2
        name: tmpdir
        slurm:
          signal_before_end_seconds: 0
          sbatch_extra: ["--export=ALL,SLURM_TMPDIR={tmpdir}"]
        services:
          - name: wal
            terminal: true
            command: [bash, -c, 'test -d {{local_dir}} && echo {{local_dir}} > {seen}']
        """
    )
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert seen.read_text().strip() == f"{job.node_local(str(tmpdir))}/service_wal"
    assert not os.path.exists(job.node_local(str(tmpdir)))


# --------------------------------------------------------------------------- day-2 operations


def test_ps_logs_restart_and_stop_of_a_slurm_job(
    submit: Any, cluster: Any, shell: Any, tmp_path: Path
) -> None:
    """What a user does with a running Slurm job, from the submitting host: list it, read
    and follow its logs (written by the nodes into the shared job directory), restart one
    service (the orchestrator runs on the batch node; on this test cluster that is a
    network namespace of the same kernel, so its AF_UNIX socket is reachable), then stop
    the job, which ends as stopped by the user."""
    job = submit(
        """
        schema: 2
        name: ops
        slurm: {signal_before_end_seconds: 0}
        services:
          - name: web
            nodes: 1
            command: [bash, -c, "echo web up on $(hostname); i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"]
            readiness: {log: {pattern: web up}}
          - name: base
            nodes: 2
            critical: true
            command: [bash, -c, "echo base up; exec sleep 1000"]
            readiness: {log: {pattern: base up}}
        """
    )
    env = cluster.env()
    job.wait_event("serving")

    listed = srt("ps", "--root", str(tmp_path), "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)["jobs"]
    assert (row["state"], row["slurm_state"], row["slurm_job_id"]) == (
        "running",
        "RUNNING",
        job.job_id,
    )
    assert row["nodes"] == 3 and row["launcher"] == "slurm"

    logs = srt("logs", str(job.job_dir), env=env)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert any(re.fullmatch(r"service_web +\| web up on n\d", line) for line in lines), lines
    assert sum(1 for line in lines if re.fullmatch(r"service_base_\S+ +\| base up", line)) == 2
    follower = subprocess.Popen(
        [sys.executable, "-m", "srt_services", "logs", "-f", str(job.job_dir), "web", "-n", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )

    old_srun = job.instance_pid("service_web")
    restarted = srt("restart", str(job.job_dir), "web", env=env)
    assert restarted.returncode == 0, restarted.stderr + job.sbatch_log()
    web = job.srt_state().instances["service_web"]
    assert web.attempt == 2 and web.state == "ready"
    assert web.pid != old_srun, "a new srun step"
    assert len(job.events("launched", step="service_web")) == 2
    (first,) = job.events("exited", step="service_web", attempt=1)
    assert first["signal"] == 15, "the old step was stopped with scancel --signal=TERM"

    down = srt("stop", str(job.job_dir), "web", env=env)
    assert down.returncode == 0, down.stderr + job.sbatch_log()
    assert "stays down" in down.stdout
    assert "service_web" not in {name for name, _ in shell.steps(job.job_id).values()}
    time.sleep(1.0)  # longer than the restart backoff: the policy must not bring it back
    status = json.loads(srt("status", str(job.job_dir), "--json", env=env).stdout)
    row = {r["step"]: r for r in status["instances"]}["service_web"]
    assert row["state"] == "stopped" and not row["running"], row
    assert len(job.events("launched", step="service_web")) == 2
    back = srt("restart", str(job.job_dir), "web", env=env)
    assert back.returncode == 0, back.stderr + job.sbatch_log()
    assert job.srt_state().instances["service_web"].state == "ready"

    refused = srt("stop", str(job.job_dir), "base", env=env)
    assert refused.returncode == 1 and "critical" in refused.stderr

    stopped = srt("stop", str(job.job_dir), env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    result = job.result()
    assert result["status"] == "stopped" and result["exit_code"] == 0
    assert result["cause"]["kind"] == "user_stop"

    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    followed = [line.split(" | ", 1)[1] for line in out.splitlines()]
    assert any(re.fullmatch(r"=== attempt 2 \(pid \d+\) started .+: restarted by srt restart .+", f)
               for f in followed), followed  # fmt: skip
    assert followed.count("tick 0") == 2, "attempts 2 and 3 (after stop web), each followed once"
    assert (
        json.loads(srt("ps", "--root", str(tmp_path), "--json", env=env).stdout)["jobs"][0]["state"]
        == "stopped"
    )
    job.assert_nothing_left()


def test_node_addresses_come_from_the_site_interface(
    submit: Any, cluster: Any, tmp_path: Path
) -> None:
    """``[slurm] network_interface``: every node is asked for that interface's address, all
    of them in one step across the allocation, each answer read by the node name it
    carries (not by task order)."""
    site = tmp_path / "site.toml"
    site.write_text('[slurm]\nnetwork_interface = "eth0"\n')
    out = tmp_path / "ips"
    job = submit(
        f"""
        schema: 2
        name: iface
        observability: {{metrics: false}}
        slurm: {{signal_before_end_seconds: 0}}
        services:
          - name: probe
            nodes: 3
            terminal: true
            command: [bash, -c, "echo $(hostname) {{node_ip}} >> {out}"]
        """,
        extra_env={"SRT_SITE_CONFIG": str(site)},
    )
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    assert job.result()["exit_code"] == 0, job.sbatch_log()
    said = dict(line.split() for line in out.read_text().splitlines())
    assert said == dict(cluster.node_ips), "each node's own eth0 address, as {node_ip}"


def test_an_interface_without_an_address_fails_the_job_naming_every_node(
    submit: Any, tmp_path: Path
) -> None:
    """Every node answers in the same step; each one that has no address on the interface
    is named, before anything starts."""
    site = tmp_path / "site.toml"
    site.write_text('[slurm]\nnetwork_interface = "lo"\n')  # loopback only: not an address
    job = submit(
        """
        schema: 2
        name: noiface
        observability: {metrics: false}
        slurm: {signal_before_end_seconds: 0}
        services:
          - name: probe
            nodes: 3
            command: [bash, -c, "sleep 1000"]
        """,
        extra_env={"SRT_SITE_CONFIG": str(site)},
    )
    job.wait_done()
    log = job.sbatch_log()
    for node in ("n1", "n2", "n3"):
        assert f"{node}: no address in" in log, log
    assert not job.events("launched"), log


def test_exec_runs_on_the_instances_node_in_its_environment(submit: Any, cluster: Any) -> None:
    """`srt exec JOBDIR web -- CMD` from the submitting host: a step of the job's allocation
    on the node web runs on (srun --overlap), with the environment srt gave web."""
    job = submit(
        """
        schema: 2
        name: ex
        slurm: {signal_before_end_seconds: 0}
        services:
          - name: web
            nodes: 1
            command: [bash, -c, "echo web up on $(hostname); exec sleep 1000"]
            readiness: {log: {pattern: web up}}
            env: {GREETING: "hello there"}
          - name: base
            nodes: 2
            command: [bash, -c, "echo base up; exec sleep 1000"]
            readiness: {log: {pattern: base up}}
        """
    )
    env = cluster.env()
    job.wait_event("serving")
    node = job.srt_state().instances["service_web"].node
    shown = srt(
        "exec", str(job.job_dir), "web", "--", "bash", "-c",
        'echo "$(hostname)|$GREETING|$SRT_INSTANCE|$SRT_NODE|${SRT_JOB_COOKIE:-none}"; exit 5',
        env=env,
    )  # fmt: skip
    assert shown.returncode == 5, shown.stderr + job.sbatch_log()
    assert shown.stdout == f"{node}|hello there|service_web|{node}|none\n"
    assert f"srt exec: as service_web on {node} (Slurm job {job.job_id})" in shown.stderr
    several = srt("exec", str(job.job_dir), "base", "--", "true", env=env)
    assert several.returncode == 1 and "'base' has 2 instances; name one" in several.stderr

    stopped = srt("stop", str(job.job_dir), env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert job.wait_done() == "COMPLETED", job.sbatch_log()
    job.assert_nothing_left()
