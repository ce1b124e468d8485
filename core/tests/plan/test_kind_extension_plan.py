"""What the kind extension points put into a plan: fleet probes, the last stop tier, a
container fallback, what services tell workers, the job's discovery env in each instance's
context, options that still apply to an external service, and ``{local_dir}``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import pytest
from srt_services.contracts.plan import LAST_TIER, TIER_OF_PHASE, Plan
from srt_services.extend import (
    DefaultProbe,
    InstanceContext,
    KindOptions,
    Node,
    Recipe,
    ServiceKind,
    ServiceSpec,
    hookimpl,
)
from srt_services.plugins.manager import PluginSet
from srt_services.testing import kit

WORKERS = {
    "resources": {"gpus_per_node": 8},
    "frontend": {"type": "sglang", "command": ["python3", "-m", "f"]},
    "roles": {
        "prefill": {"workers": 2, "command": ["python3", "-m", "w"]},
        "decode": {"workers": 1, "command": ["python3", "-m", "w"], "env": {"CACHE_HOST": "mine"}},
    },
}


class Fleet(ServiceKind):
    name: ClassVar[str] = "x-fleet"
    summary: ClassVar[str] = "fleet"
    requires_command: ClassVar[bool] = True
    seen: ClassVar[list[list[str]]] = []

    def fleet_readiness(
        self, spec: ServiceSpec, options: Any, instances: Sequence[InstanceContext]
    ) -> DefaultProbe:
        Fleet.seen.append([c.node.name for c in instances])
        members = ",".join(c.node.ip for c in instances)
        return DefaultProbe("http", {"port": 9100, "path": f"/members?want={members}"}, timeout=42)


class Scraper(ServiceKind):
    name: ClassVar[str] = "x-scraper"
    summary: ClassVar[str] = "stops last"
    requires_command: ClassVar[bool] = True
    stops_last: ClassVar[bool] = True


class Cache(ServiceKind):
    name: ClassVar[str] = "x-cache"
    summary: ClassVar[str] = "tells the decode workers where it is"
    requires_command: ClassVar[bool] = True

    def worker_env(
        self, spec: ServiceSpec, options: Any, role: str, recipe: Recipe
    ) -> dict[str, str]:
        if role != "decode" and role != "prefill":
            return {}
        return {"CACHE_HOST": "{node_ip}", "CACHE_ROLE": role}


class Announcer(ServiceKind):
    """Announces an address the way a discovery service does; one option shapes it."""

    name: ClassVar[str] = "x-announcer"
    summary: ClassVar[str] = "tells consumers where it is"
    requires_command: ClassVar[bool] = True
    supports_external: ClassVar[bool] = True
    external_options: ClassVar[frozenset[str]] = frozenset({"port"})

    class Options(KindOptions):
        port: int = 7000
        other: int = 0

    def discovery_env(self, spec: ServiceSpec, options: Any, address: str | None) -> dict[str, str]:
        host = spec.external if address is None else address
        return {"ANNOUNCED": f"{host}:{options.port}"}


class Follower(ServiceKind):
    """Reads the announced address from its context into its own forced env."""

    name: ClassVar[str] = "x-follower"
    summary: ClassVar[str] = "points its process at the announcer"
    requires_command: ClassVar[bool] = True

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        return {"FOLLOWS": ctx.discovery_env.get("ANNOUNCED", "nothing")}


class Facts(ServiceKind):
    name: ClassVar[str] = "x-facts"
    summary: ClassVar[str] = "tells the benchmark where its head listens"
    requires_command: ClassVar[bool] = True

    def service_facts(
        self, spec: ServiceSpec, options: Any, nodes: Sequence[Node]
    ) -> dict[str, str]:
        return {
            "head address": f"{nodes[0].ip}:6379",
            "members": ",".join(n.name for n in nodes[1:]),
            "nodes": "a kind cannot take core's keys",
        }


class Kinds:
    @hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [Fleet, Scraper, Cache, Announcer, Follower, Facts]


@pytest.fixture
def plan(srt_register: Callable[..., str], srt_plan: Callable[..., Plan]) -> Callable[..., Plan]:
    srt_register(Kinds(), "kinds")

    def make(services: list[dict[str, Any]], **more: Any) -> Plan:
        return srt_plan({**WORKERS, "services": services, **more})

    return make


def test_a_fleet_probe_is_planned_over_every_instance(plan: Callable[..., Plan]) -> None:
    Fleet.seen.clear()
    p = plan(
        [{"name": "ray", "type": "x-fleet", "command": ["x"], "placement": {"node": "workers"}}]
    )
    unit = p.unit("ray")
    assert Fleet.seen == [[i.node for i in unit.instances]]
    assert len(unit.instances) == 3
    assert unit.fleet is not None
    assert unit.fleet.probe == "http" and unit.fleet.timeout == 42
    want = ",".join(i.node_ip for i in unit.instances)
    first = unit.instances[0].node_ip
    assert unit.fleet.config["url"] == f"http://{first}:9100/members?want={want}"
    # the plan's JSON round-trips it (srt status and a resumed run read plan.json)
    assert Plan.from_json(p.to_json()).unit("ray").fleet == unit.fleet


def test_a_kind_without_a_fleet_probe_plans_none(plan: Callable[..., Plan]) -> None:
    p = plan([{"name": "s", "command": ["x"]}])
    assert p.unit("s").fleet is None


def test_stops_last_puts_the_unit_after_the_discovery_plane(plan: Callable[..., Plan]) -> None:
    p = plan(
        [
            {"name": "prom", "type": "x-scraper", "command": ["x"], "start": "infra"},
            {"name": "plane", "command": ["x"], "start": "infra"},
        ]
    )
    assert p.unit("plane").tier == TIER_OF_PHASE["infra"]
    assert p.unit("prom").tier == LAST_TIER > max(TIER_OF_PHASE.values())
    assert p.unit("prom").phase == "infra", "stopping last does not change when it starts"


def test_services_tell_workers_rendered_per_worker_and_the_role_env_wins(
    plan: Callable[..., Plan],
) -> None:
    p = plan([{"name": "cache", "type": "x-cache", "command": ["x"]}])
    prefill = p.unit("prefill").instances
    assert [i.env["CACHE_HOST"] for i in prefill] == [i.node_ip for i in prefill]
    assert {i.env["CACHE_ROLE"] for i in prefill} == {"prefill"}
    (decode,) = p.unit("decode").instances
    assert decode.env["CACHE_HOST"] == "mine", "the recipe's role env wins over a service's"
    assert decode.env["CACHE_ROLE"] == "decode"
    assert "CACHE_HOST" not in p.unit("cache").instances[0].env


def test_local_dir_is_made_on_the_node_only_when_an_instance_names_it(
    plan: Callable[..., Plan],
) -> None:
    p = plan(
        [
            {"name": "wal", "command": ["db", "--data", "{local_dir}/data"]},
            {"name": "plain", "command": ["db"]},
        ]
    )
    (inst,) = p.unit("wal").instances
    local = f"{p.local_dir}/{inst.step}"
    assert inst.argv == ["db", "--data", f"{local}/data"]
    assert inst.preamble is not None and inst.preamble.startswith(f"mkdir -p -- {local}")
    assert p.unit("plain").instances[0].preamble is None
    assert p.local_dir == f"/tmp/srt-{p.job_id}"  # a dry run: the symbolic job dir
    # a real job dir adds a digest of it: two jobs named alike never share their files
    from srt_services.extend import JobPaths

    one, two = JobPaths("/a/job", "job").local_job_dir, JobPaths("/b/job", "job").local_job_dir
    assert one.startswith("/tmp/srt-") and two.startswith("/tmp/srt-")
    assert one != two
    assert len(one) <= len("/tmp/srt-") + 10, "short: servers put socket paths under it"
    # a Slurm job's id is unique on its cluster
    assert JobPaths("/shared/jobs/x", "4242").local_job_dir == "/tmp/srt-4242"


def test_an_instance_context_carries_the_jobs_discovery_env(plan: Callable[..., Plan]) -> None:
    p = plan(
        [
            {"name": "ann", "type": "x-announcer", "command": ["x"], "options": {"port": 7100}},
            # it does not inherit the env, yet its kind can still point it at the announcer
            {"name": "f", "type": "x-follower", "command": ["x"], "inherit_discovery_env": False},
        ]
    )
    ann_ip = p.unit("ann").instances[0].node_ip
    (inst,) = p.unit("f").instances
    assert inst.env == {"FOLLOWS": f"{ann_ip}:7100"}


def test_an_external_services_address_reaches_the_context(plan: Callable[..., Plan]) -> None:
    p = plan(
        [
            {
                "name": "ann",
                "type": "x-announcer",
                "external": "10.9.8.7",
                "options": {"port": 7200},
            },
            {"name": "f", "type": "x-follower", "command": ["x"]},
        ]
    )
    assert p.unit("f").instances[0].env["FOLLOWS"] == "10.9.8.7:7200"


def test_external_options_are_not_warned_about_the_others_are(
    srt_register: Callable[..., str], srt_plugins: PluginSet
) -> None:
    srt_register(Kinds(), "kinds")
    loaded = kit.load(
        srt_plugins,
        {
            **WORKERS,
            "services": [
                {
                    "name": "ann",
                    "type": "x-announcer",
                    "external": "10.9.8.7",
                    "options": {"port": 7200, "other": 1},
                }
            ],
        },
    )
    text = "\n".join(w.render(loaded.source) for w in loaded.warnings)
    assert "options.other" in text and "no effect with external" in text
    assert "options.port" not in text


def test_service_facts_reach_the_benchmark_under_the_service_name(
    plan: Callable[..., Plan],
) -> None:
    p = plan(
        [
            {
                "name": "my-ray",
                "type": "x-facts",
                "command": ["x"],
                "placement": {"node": "workers"},
            },
            {
                "name": "off",
                "type": "x-facts",
                "external": None,
                "command": ["x"],
                "enabled": False,
            },
        ],
        benchmark={"type": "command", "command": ["bench"]},
    )
    unit = p.unit("my-ray")
    (bench,) = p.unit("benchmark").instances
    first = unit.instances[0]
    assert bench.env["SRT_SERVICE_MY_RAY_HEAD_ADDRESS"] == f"{first.node_ip}:6379"
    assert bench.env["SRT_SERVICE_MY_RAY_MEMBERS"] == ",".join(unit.nodes[1:])
    # core's own keys win over a kind's
    assert bench.env["SRT_SERVICE_MY_RAY_NODES"] == ",".join(unit.nodes)
    assert not any(k.startswith("SRT_SERVICE_OFF_") for k in bench.env)
    # only the benchmark is told: the service's facts are not discovery environment
    assert "SRT_SERVICE_MY_RAY_HEAD_ADDRESS" not in unit.instances[0].env
