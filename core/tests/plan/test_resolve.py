"""What ``resolve`` decides: implied services merged with declared ones, phases, step names,
the layered environment, discovery addresses, and the JSON form of the plan."""

from __future__ import annotations

import json
import textwrap
from typing import Any, ClassVar

import orjson
import pytest
import srt_services
from srt_services.contracts.implied import ImpliedService
from srt_services.contracts.kind import KindOptions, ServiceKind
from srt_services.contracts.plan import Plan
from srt_services.recipe.models import Recipe
from srt_services.site_config import SiteConfig
from srt_services.testing import PluginSet, kit


class Registry(ServiceKind):
    """A discovery plane: consumers get REGISTRY_URL; it never gets discovery env itself."""

    class Options(KindOptions):
        port: int = 2500

    name: ClassVar[str] = "registry"
    Options: ClassVar[type[Options]] = Options  # type: ignore[misc]
    default_start: ClassVar[str] = "infra"
    default_critical: ClassVar[bool] = True
    default_placement: ClassVar[str] = "infra"
    supports_external: ClassVar[bool] = True
    supports_dedicated: ClassVar[bool] = True
    is_discovery_plane: ClassVar[bool] = True

    def command(self, spec: Any, options: Any, ctx: Any) -> list[str]:
        return ["registry", "--listen", f"{{node_ip}}:{options.port}"]

    def default_env(self, spec: Any, options: Any, ctx: Any) -> dict[str, str]:
        return {"REGISTRY_DATA": "{work_dir}/data", "LEVEL": "info"}

    def forced_env(self, spec: Any, options: Any, ctx: Any) -> dict[str, str]:
        return {"REGISTRY_NODE": "{node}"}

    def listen_ports(self, spec: Any, options: Any) -> list[int]:
        return [options.port]

    def discovery_env(self, spec: Any, options: Any, address: str | None) -> dict[str, str]:
        host = spec.external if address is None else f"http://{address}:{options.port}"
        return {"REGISTRY_URL": host}


class RegistryPlugin:
    @srt_services.hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [Registry]

    @srt_services.hookimpl
    def srt_implied_services(self, recipe: Recipe) -> list[ImpliedService]:
        if recipe.frontend_type == "vllm":
            return [ImpliedService({"name": "registry", "type": "registry"}, "frontend.type vllm")]
        return []


@pytest.fixture
def with_registry(srt_plugins: PluginSet) -> PluginSet:
    srt_plugins.register(RegistryPlugin(), "registry-plugin")
    return srt_plugins


JOB = """
schema: 2
name: t
frontend: {type: vllm, command: [f]}
roles:
  agg: {workers: 2, gpus_per_worker: 4, command: [w]}
"""


def job(services: str = "") -> str:
    return JOB + (
        "services:\n" + textwrap.indent(textwrap.dedent(services), "  ") if services else ""
    )


def test_implied_service_with_its_reason(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(job())
    unit = planned.unit("registry")
    assert unit.implied_by == "frontend.type vllm"
    assert unit.phase == "infra"
    assert unit.critical is True
    assert planned.phases["infra"] == ["registry"]
    assert unit.instances[0].argv == ["registry", "--listen", "<node0-ip>:2500"]


def test_declared_entry_takes_over_the_implied_one(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(
        job("""
        - name: side
          command: [s]
        - name: registry
          type: registry
          options: {port: 2600}
        """)
    )
    unit = planned.unit("registry")
    assert unit.implied_by is None
    assert unit.replaces_implied == "frontend.type vllm"
    assert unit.instances[0].argv[-1] == "<node0-ip>:2600"
    # the implied position is kept: it is the first service
    assert [u.name for u in planned.units if u.category == "service"] == ["registry", "side"]


def test_enabled_false_switches_an_implied_service_off(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(job("- {name: registry, enabled: false}\n"))
    assert all(u.name != "registry" for u in planned.units)
    assert planned.discovery_env == {}


def test_disabled_declared_service_is_dropped(srt_plan) -> None:
    planned = srt_plan(job("- {name: offline, command: [x], enabled: false}\n"))
    assert all(u.name != "offline" for u in planned.units)


def test_discovery_env_only_for_planes_that_run(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(
        job(
            "- {name: side, command: [s]}\n"
            "- {name: quiet, command: [q], inherit_discovery_env: false}\n"
        )
    )
    assert planned.discovery_env == {"REGISTRY_URL": "http://<node0-ip>:2500"}
    assert planned.unit("side").instances[0].env["REGISTRY_URL"] == "http://<node0-ip>:2500"
    assert "REGISTRY_URL" not in planned.unit("quiet").instances[0].env
    assert "REGISTRY_URL" not in planned.unit("registry").instances[0].env  # a plane itself
    assert planned.unit("agg").instances[0].env["REGISTRY_URL"] == "http://<node0-ip>:2500"
    # no plane, no address: a static frontend job gets none
    static = srt_plan(job().replace("type: vllm", "type: sglang"))
    assert static.discovery_env == {}


def test_external_plane_hands_out_its_address(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(
        job("- {name: registry, type: registry, external: 'http://reg.invalid:2500'}\n")
    )
    assert planned.discovery_env == {"REGISTRY_URL": "http://reg.invalid:2500"}
    assert planned.unit("registry").instances == []


def test_environment_layers(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(
        job("""
        - name: registry
          type: registry
          env: {LEVEL: debug, REGISTRY_NODE: mine, EXTRA: "{node}"}
        """)
    )
    unit = planned.unit("registry")
    env = unit.instances[0].env
    assert env == {
        "REGISTRY_DATA": "<job_dir>/work/service_registry/data",  # kind default, rendered
        "LEVEL": "debug",  # the recipe wins over a kind default
        "EXTRA": "node0",
        "REGISTRY_NODE": "node0",  # forced by the kind: the recipe's value is ignored
    }
    assert unit.warnings == [
        "env.REGISTRY_NODE is set by type registry; the recipe's value is ignored"
    ]


def test_dedicated_placement_reserves_a_node(with_registry: PluginSet, srt_plan) -> None:
    planned = srt_plan(job("- {name: registry, type: registry, placement: {node: dedicated}}\n"))
    assert planned.infra == "node0"
    assert planned.head == "node1"
    assert planned.nodes[0].roles == ["dedicated-infra"]
    assert planned.unit("registry").nodes == ["node0"]


def test_phases_and_tiers(srt_plan) -> None:
    planned = srt_plan(
        job("""
        - {name: late, command: [a]}
        - {name: early, command: [b], start: before_workers}
        - {name: first, command: [c], start: infra}
        """)
        + "benchmark: {type: command, command: [bench]}\n"
    )
    assert planned.phases == {
        "infra": ["first"],
        "before_workers": ["early"],
        "workers": ["agg"],
        "frontend": ["frontend"],
        "after_frontend": ["late"],
        "benchmark": ["benchmark"],
    }
    tiers = {u.name: u.tier for u in planned.units}
    assert tiers == {"first": 2, "early": 1, "agg": 0, "frontend": 0, "late": 0, "benchmark": 0}


def test_after_is_planned_shown_and_turned_into_waits(srt_plan) -> None:
    from srt_services.plan.text import render_plan
    from srt_services.plan.waits import is_chain, phase_waits

    planned = srt_plan(
        job("""
        - {name: store, command: [a], start: infra}
        - {name: slow, command: [b]}
        - {name: quick, command: [c], after: []}
        - {name: late, command: [d], after: [tail, store]}
        - {name: tail, command: [e]}
        """)
    )
    names = planned.phases["after_frontend"]
    units = {u.name: u for u in planned.units}
    assert [units[n].after for n in names] == [None, [], ["tail", "store"], None]
    # the chain skips the units that left it; a unit of an earlier phase is no wait
    assert phase_waits(names, units) == {
        "slow": [],
        "quick": [],
        "late": ["tail"],
        "tail": ["slow"],
    }
    assert not is_chain(names, units)
    assert is_chain(planned.phases["infra"], units)
    text = render_plan(planned)
    assert "after: - (starts with its phase, not after the service declared before it)" in text
    assert "after: tail, store (not the service declared before it)" in text
    assert text.count("    after:") == 2
    again = Plan.from_json(planned.to_json())
    assert again.unit("late").after == ["tail", "store"] and again.unit("slow").after is None


def test_site_readiness_timeout_raises_the_defaults_only(srt_plan) -> None:
    text = job("""
    - {name: quiet, command: [a], readiness: {port: 7001}}
    - {name: stated, command: [b], readiness: {port: 7002, timeout_seconds: 30}}
    - name: live
      command: [c]
      readiness: {port: 7003}
      liveness: {port: 7003}
    """).replace("command: [w]}", "command: [w], readiness: {port: 9000}}")

    def timeouts(floor: float | None) -> dict[str, float]:
        planned = srt_plan(text, site=SiteConfig(readiness_timeout=floor))
        out = {}
        for inst in planned.instances():
            if inst.readiness is not None:
                out[inst.unit] = inst.readiness.timeout
        out["live.liveness"] = planned.unit("live").instances[0].liveness.timeout  # type: ignore[union-attr]
        return out

    assert timeouts(None) == {
        "quiet": 120.0,
        "stated": 30.0,
        "live": 120.0,
        "live.liveness": 120.0,
        "agg": 120.0,
    }
    # a cold-image cluster: every default budget is raised, what the recipe wrote is kept
    assert timeouts(600) == {
        "quiet": 600.0,
        "stated": 30.0,
        "live": 600.0,
        "live.liveness": 120.0,
        "agg": 600.0,
    }
    # never lowered
    assert timeouts(60)["quiet"] == 120.0


def test_step_and_log_names(srt_plan) -> None:
    planned = srt_plan(
        job("""
        - {name: one, command: [a]}
        - {name: many, command: [b], placement: {node: all}}
        - {name: each, command: [c], placement: {node: agg, per: worker}}
        """),
        nodes=2,
    )
    steps = {u.name: [i.step for i in u.instances] for u in planned.units}
    assert steps["one"] == ["service_one"]
    assert steps["many"] == ["service_many"]  # one node in this job: no suffix
    assert steps["each"] == ["service_each_agg_0_node0", "service_each_agg_1_node0"]
    assert planned.unit("each").instances[0].log == "logs/service_each_agg_0_node0.out"
    wide = srt_plan(
        job("- {name: many, command: [b], placement: {node: all}}\n").replace(
            "workers: 2", "workers: 4"
        )
    )
    assert [i.step for i in wide.unit("many").instances] == [
        "service_many_node0",
        "service_many_node1",
    ]


def test_restart_defaults(srt_plan) -> None:
    planned = srt_plan(
        job(
            "- {name: a, command: [a]}\n- {name: b, command: [b], critical: true}\n"
            "- {name: c, command: [c], restart: {policy: 'no'}}\n"
        )
    )
    a = planned.unit("a").restart
    assert a is not None and (a.policy, a.backoff_initial, a.backoff_max, a.max_failures) == (
        "on-failure",
        1.0,
        60.0,
        5,
    )
    assert planned.unit("b").restart is None
    assert planned.unit("c").restart is None


def test_liveness_is_planned_with_its_settings_and_defaults(srt_plan) -> None:
    planned = srt_plan(
        job(
            "- name: a\n  command: [a]\n  readiness: {port: 7000}\n"
            "  liveness: {http: {port: 7000, path: /alive}, period_seconds: 5,"
            " failure_threshold: 2}\n"
            "- {name: b, command: [b], liveness: {log: {pattern: beat}}}\n"
        )
    )
    (a,) = planned.unit("a").instances
    assert a.liveness is not None and a.readiness is not None
    assert (a.liveness.probe, a.liveness.config["url"]) == ("http", "http://<node0-ip>:7000/alive")
    assert (a.liveness.period, a.liveness.failure_threshold, a.liveness.attempt_timeout) == (
        5.0,
        2,
        1.0,
    )
    (b,) = planned.unit("b").instances
    assert b.readiness is None and b.liveness is not None
    assert (b.liveness.probe, b.liveness.period, b.liveness.failure_threshold) == ("log", 10.0, 3)
    # a port used by both probes of one instance is one claim, not a clash
    assert a.ports == [7000]


def test_benchmark_learns_where_services_run(srt_plan) -> None:
    planned = srt_plan(
        job("- {name: my-side, command: [a], placement: {node: agg}}\n")
        + "benchmark: {type: command, command: [bench]}\n"
    )
    env = planned.unit("benchmark").instances[0].env
    assert env["SRT_SERVICE_MY_SIDE_NODES"] == "node0"
    assert env["SRT_SERVICE_MY_SIDE_IPS"] == "<node0-ip>"
    assert env["SRT_SERVICE_MY_SIDE_NODE_COUNT"] == "1"
    assert env["SRT_FRONTEND_URL"] == "http://<node0-ip>:8000"
    assert env["SRT_GPUS_PER_NODE"] == "8"


def test_validate_recipe_hook_problems_are_located(srt_plugins: PluginSet, srt_problem) -> None:
    from srt_services.recipe.problems import Problem

    class Rules:
        @srt_services.hookimpl
        def srt_validate_recipe(self, recipe: Recipe) -> list[Problem]:
            if len(recipe.services) > 1:
                return [Problem(("services", 1, "name"), "only one service, please")]
            return []

    srt_plugins.register(Rules(), "rules")
    p = srt_problem(job("- {name: a, command: [a]}\n- {name: b, command: [b]}\n"))
    assert p.label == "services[b].name"
    assert p.message == "only one service, please"
    assert p.line == 8


def test_broken_implied_services_hook_is_reported(srt_plugins: PluginSet, srt_problem) -> None:
    class Broken:
        @srt_services.hookimpl
        def srt_implied_services(self, recipe: Recipe) -> list[ImpliedService]:
            raise RuntimeError("boom")

    srt_plugins.register(Broken(), "broken")
    p = srt_problem(job())
    assert p.label == "services"
    assert p.message == "plugin broken failed in srt_implied_services: RuntimeError: boom"


def test_invalid_implied_entry_is_reported(srt_plugins: PluginSet, srt_problem) -> None:
    class Bad:
        @srt_services.hookimpl
        def srt_implied_services(self, recipe: Recipe) -> list[ImpliedService]:
            return [ImpliedService({"name": "../x", "command": ["a"]}, "because")]

    srt_plugins.register(Bad(), "bad")
    p = srt_problem(job())
    assert p.message.startswith("an implied service '../x' (implied by: because) is invalid: ")


# --------------------------------------------------------------------------- determinism and JSON


def test_plan_is_deterministic(srt_plugins: PluginSet, repo) -> None:
    text = (repo / "examples" / "disagg-services.yaml").read_text()
    first = kit.plan(srt_plugins, text, source="r.yaml").to_json()
    again = kit.plan(kit.isolated_plugins(), text, source="r.yaml").to_json()
    assert first == again


@pytest.mark.parametrize("example", ["minimal", "disagg-services", "pools", "per-worker"])
def test_json_round_trip(srt_plugins: PluginSet, repo, example: str) -> None:
    text = (repo / "examples" / f"{example}.yaml").read_text()
    planned = kit.plan(srt_plugins, text, source="r.yaml")
    data = json.loads(planned.to_json())
    back = Plan.from_json(json.dumps(data))
    assert isinstance(back, Plan)
    assert back == planned
    assert back.to_json() == planned.to_json()
    assert orjson.loads(planned.to_json(indent=True)) == data


def test_metric_record_is_the_model_dump() -> None:
    # the planner writes the record out by hand for speed: a field added to MetricsSpec
    # must show up here before it can go missing from plans
    from srt_services.plan.targets import metric_record
    from srt_services.recipe.models import MetricsSpec

    m = MetricsSpec.model_validate({"port": 9100, "path": "/m", "nodes": "first", "name": "x"})
    assert metric_record(m) == m.model_dump()
    assert list(metric_record(m)) == list(m.model_dump())
