"""Kind extension points under ``srt run``: a fleet gate over all instances, a kind that
stops last, and node-local scratch (``{local_dir}``) removed with the job.

The kinds come from a small plugin installed for the ``srt run`` subprocess the way pip
would install one (a distribution with an ``srt.plugins`` entry point on its path).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from srt_services.testing.jobs import Jobs, events_of, plugin_env

PLUGIN = '''
from typing import Any, ClassVar

from srt_services.extend import DefaultProbe, ServiceKind, hookimpl


class FleetKind(ServiceKind):
    """Ready when every instance is, and then when <job dir>/formed exists."""

    name: ClassVar[str] = "fleet-test"
    summary: ClassVar[str] = "test kind with a fleet gate"
    requires_command: ClassVar[bool] = True
    default_readiness_timeout: ClassVar[float] = 3.0
    default_readiness_interval: ClassVar[float] = 0.1

    def fleet_readiness(self, spec: Any, options: Any, instances: Any) -> DefaultProbe:
        assert [c.index for c in instances] == list(range(len(instances)))
        return DefaultProbe("file", {"path": "formed"})


class LastKind(ServiceKind):
    name: ClassVar[str] = "last-test"
    summary: ClassVar[str] = "test kind that stops after everything"
    requires_command: ClassVar[bool] = True
    stops_last: ClassVar[bool] = True


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    return [FleetKind, LastKind]
'''


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    found = plugin_env(
        tmp_path / "site", "srt-kindtest", {"kindtest_plugin": PLUGIN}, "kindtest_plugin"
    )
    config = tmp_path / "site.toml"
    config.write_text(f'[storage]\nnode_local = "{tmp_path / "local"}"\n', encoding="utf-8")
    return {**found, "SRT_SITE_CONFIG": str(config)}


def fleet_recipe(member: str, after: str = "echo after") -> str:
    return f"""
        schema: 2
        name: fleet
        observability:
          metrics: false
        services:
          - name: cluster
            type: fleet-test
            nodes: 2
            command: [bash, -c, '{member}']
            readiness: {{log: {{pattern: joined}}}}
          - name: user
            start: after_frontend
            command: [bash, -c, "{after}; sleep 30"]
        benchmark: {{type: command, command: [bash, -c, "exit 0"]}}
        """


def test_the_fleet_gate_holds_the_phase_until_the_whole_service_formed(
    jobs: Jobs, env: dict[str, str]
) -> None:
    member = (
        'echo joined; if [ "$SRT_NODE" = node1 ]; then sleep 0.5; echo ok > "$SRT_JOB_DIR/formed"; fi;'
        " sleep 30"
    )
    run = jobs.run(fleet_recipe(member), env=env)
    assert run.code == 0, run.stderr
    names = [e["event"] for e in run.events()]
    assert names.index("fleet_waiting") < names.index("fleet_ready")
    ready_steps = [e["step"] for e in events_of(run, "ready") if e.get("unit") == "cluster"]
    assert len(ready_steps) == 2
    # every member was ready before the gate, and nothing after the gate started before it
    fleet_at = names.index("fleet_ready")
    user_launch = next(
        i for i, e in enumerate(run.events()) if e["event"] == "launched" and e["unit"] == "user"
    )
    assert fleet_at < user_launch
    assert events_of(run, "fleet_ready", unit="cluster")[0]["waited"] >= 0.3


def test_a_fleet_that_never_forms_fails_its_phase_and_stops_every_member(
    jobs: Jobs, env: dict[str, str]
) -> None:
    run = jobs.run(fleet_recipe("echo joined; sleep 30"), env=env)
    assert run.code == 1
    cause = run.result()["cause"]
    assert cause["kind"] == "readiness_timeout" and cause["unit"] == "cluster"
    assert "did not form within 3s" in cause["message"]
    assert "formed does not exist yet" in cause["message"]  # the probe's last word
    assert not events_of(run, "launched", unit="user"), "nothing after the gate may start"


def test_a_member_that_dies_while_the_fleet_forms_fails_at_once(
    jobs: Jobs, env: dict[str, str]
) -> None:
    member = 'echo joined; if [ "$SRT_NODE" = node1 ]; then sleep 0.3; exit 5; fi; sleep 30'
    run = jobs.run(fleet_recipe(member), env=env)
    assert run.code == 1
    cause = run.result()["cause"]
    assert cause["kind"] == "exited_before_ready" and cause["code"] == 5
    assert run.elapsed < 10


def test_a_kind_that_stops_last_outlives_the_discovery_plane(
    jobs: Jobs, env: dict[str, str], tmp_path: Path
) -> None:
    order = tmp_path / "order.txt"
    trap = f"trap 'echo {{name}} >> {order}; exit 0' TERM; echo up; while true; do sleep 0.05; done"
    run = jobs.run(
        f"""
        schema: 2
        name: last
        observability:
          metrics: false
        services:
          - name: scraper
            type: last-test
            start: infra
            command: [bash, -c, "{trap.format(name="scraper")}"]
            readiness: {{log: {{pattern: up}}}}
          - name: plane
            start: infra
            command: [bash, -c, "{trap.format(name="plane")}"]
            readiness: {{log: {{pattern: up}}}}
          - name: late
            command: [bash, -c, "{trap.format(name="late")}"]
            readiness: {{log: {{pattern: up}}}}
        benchmark: {{type: command, command: [bash, -c, "exit 0"]}}
        """,
        env=env,
    )
    assert run.code == 0, run.stderr
    assert order.read_text().split() == ["late", "plane", "scraper"]


def test_local_dir_exists_on_the_node_while_the_job_runs_and_is_gone_after(
    jobs: Jobs, env: dict[str, str], tmp_path: Path
) -> None:
    seen = tmp_path / "seen.txt"
    run = jobs.run(
        f"""
        schema: 2
        name: scratch
        observability:
          metrics: false
        services:
          - name: keeper
            command: [bash, -c, 'echo state > {{local_dir}}/wal; cat {{local_dir}}/wal > {seen}; echo up; sleep 30']
            readiness: {{log: {{pattern: up}}}}
        benchmark: {{type: command, command: [bash, -c, "exit 0"]}}
        """,
        env=env,
    )
    assert run.code == 0, run.stderr
    assert seen.read_text() == "state\n"
    local = tmp_path / "local"
    assert local.is_dir()
    assert os.listdir(local) == [], "the job's node-local tree must be removed at the end"
