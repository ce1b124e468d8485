"""Plan-time rules: the port ledger (every port of every instance, per node) and the
allocation (too small, too large), each reported with the recipe line it comes from."""

from __future__ import annotations

import textwrap
from typing import Any, ClassVar

import pytest
import srt_services
from srt_services.app import compose
from srt_services.contracts.allocation import Allocation, AllocationRequest, local
from srt_services.contracts.kind import KindOptions, ServiceKind
from srt_services.launch.local import LocalLauncher
from srt_services.testing import PluginSet, RecipeError, kit

NO_FRONTEND = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"


def services(body: str) -> str:
    return NO_FRONTEND + textwrap.dedent(body).lstrip("\n")


def test_two_services_on_one_port_of_one_node(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          readiness: {port: 9000}
        - name: b
          command: [b]
          readiness: {http: {port: 9000}}
        """)
    )
    assert p.label == "services[b].readiness"
    assert p.message == (
        "services[a] and services[b] both listen on port 9000 on node node0;"
        " give them disjoint placements or ports"
    )
    assert (p.line, p.column) == (10, 3)


def test_same_port_on_disjoint_nodes_is_fine(srt_plan) -> None:
    planned = srt_plan(
        """
        schema: 2
        name: t
        frontend: {type: vllm, command: [f]}
        roles:
          prefill: {command: [w]}
          decode: {command: [w]}
        services:
          - name: a
            command: [a]
            placement: {node: prefill}
            readiness: {port: 9000}
          - name: b
            command: [b]
            placement: {node: decode}
            readiness: {port: 9000}
        """
    )
    assert {(e["node"], e["port"], e["owner"]) for e in planned.ports} >= {
        ("node0", 9000, "services[a]"),
        ("node1", 9000, "services[b]"),
    }


def test_per_worker_instances_of_one_service_collide(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: vllm, command: [f]}
        roles:
          decode: {workers: 2, gpus_per_worker: 4, command: [w]}
        services:
          - name: side
            command: [s]
            placement: {node: decode, per: worker}
            metrics: {port: 9100}
        """
    )
    assert p.label == "services[side].metrics"
    assert p.message == (
        "instances service_side_decode_0_node0 and service_side_decode_1_node0 both listen on"
        " port 9100 on node node0; give each instance its own port (e.g. from {worker_port} or"
        " {index})"
    )
    assert (p.line, p.column) == (10, 5)


def test_metrics_port_against_a_readiness_port(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          readiness: {port: 9000}
        - name: b
          command: [b]
          metrics:
            - {name: main, port: 9001}
            - {name: extra, port: 9000}
        """)
    )
    assert p.label == "services[b].metrics[1]"
    assert "services[a] and services[b] both listen on port 9000 on node node0" in p.message
    assert (p.line, p.column) == (12, 7)


def test_metrics_on_the_first_node_only_claims_that_node(srt_plan) -> None:
    planned = srt_plan(
        services("""
        - name: train
          command: [t]
          nodes: 2
          metrics: {port: 9090, nodes: first}
        """)
    )
    assert [(e["node"], e["port"]) for e in planned.ports] == [("node0", 9090)]
    assert [t.name for t in planned.scrape_targets] == ["train_node0"]


def test_metrics_first_nodes_clash_on_the_shared_first_node(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: train
          command: [t]
          nodes: 2
          metrics: {port: 9090, nodes: first}
        - name: other
          command: [o]
          placement: {pool: train}
          metrics: {port: 9090}
        """)
    )
    assert p.label == "services[other].metrics"
    assert "both listen on port 9090 on node node0" in p.message


def test_frontend_port_against_a_service(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: sglang, command: [f], port: 9000}
        services:
          - name: a
            command: [a]
            readiness: {port: 9000}
        """
    )
    assert p.label == "frontend.port"
    assert p.message == (
        "services[a] and frontend both listen on port 9000 on node node0; give them disjoint"
        " placements or ports"
    )
    assert (p.line, p.column) == (3, 40)


def test_default_frontend_port_points_at_the_frontend(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: sglang, command: [f]}
        services:
          - name: a
            command: [a]
            readiness: {port: 8000}
        """
    )
    assert p.label == "frontend.port"
    assert "both listen on port 8000 on node node0" in p.message
    assert (p.line, p.column) == (3, 1)


def test_worker_port_against_a_service(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: sglang, command: [f]}
        roles:
          agg: {workers: 2, gpus_per_worker: 4, port: 9000, command: [w]}
        services:
          - name: a
            command: [a]
            placement: {node: agg}
            readiness: {port: 9001}
        """
    )
    assert p.label == "roles.agg.port"
    assert p.message == (
        "services[a] and roles.agg both listen on port 9001 on node node0; give them disjoint"
        " placements or ports"
    )
    assert (p.line, p.column) == (5, 41)


def test_several_collisions_are_reported_together(srt_problems) -> None:
    found = srt_problems(
        services("""
        - name: a
          command: [a]
          readiness: {port: 9000}
          metrics: {port: 9001}
        - name: b
          command: [b]
          readiness: {port: 9000}
        - name: c
          command: [c]
          metrics: {port: 9001}
        """)
    )
    assert [(p.label, p.line) for p in found] == [
        ("services[b].readiness", 11),
        ("services[c].metrics", 14),
    ]


class _Listener(ServiceKind):
    """A kind whose own command binds a port (options.port)."""

    class Options(KindOptions):
        port: int = 7777

    name: ClassVar[str] = "listener"
    Options: ClassVar[type[Options]] = Options  # type: ignore[misc]

    def command(self, spec: Any, options: Any, ctx: Any) -> list[str]:
        return ["listen", str(options.port)]

    def listen_ports(self, spec: Any, options: Any) -> list[int]:
        return [options.port]


class _ListenerPlugin:
    @srt_services.hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [_Listener]


def test_kind_ports_are_in_the_ledger(srt_plugins: PluginSet, srt_problem) -> None:
    srt_plugins.register(_ListenerPlugin(), "listener-kind")
    p = srt_problem(
        services("""
        - name: l
          type: listener
        - name: a
          command: [a]
          readiness: {port: 7777}
        """)
    )
    assert p.label == "services[a].readiness"
    assert "services[l] and services[a] both listen on port 7777 on node node0" in p.message


def test_kind_ports_follow_options(srt_plugins: PluginSet, srt_plan) -> None:
    srt_plugins.register(_ListenerPlugin(), "listener-kind")
    planned = srt_plan(
        services("""
        - name: l
          type: listener
          options: {port: 7000}
        - name: a
          command: [a]
          readiness: {port: 7777}
        """)
    )
    assert planned.unit("l").instances[0].argv == ["listen", "7000"]


def test_external_services_claim_no_port(srt_plugins: PluginSet, srt_plan) -> None:
    class Remote(_Listener):
        name: ClassVar[str] = "remote"
        supports_external: ClassVar[bool] = True

    class RemotePlugin:
        @srt_services.hookimpl
        def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
            return [Remote]

    srt_plugins.register(RemotePlugin(), "remote-kind")
    planned = srt_plan(
        services("""
        - name: r
          type: remote
          external: http://remote.invalid:7777
        - name: a
          command: [a]
          readiness: {port: 7777}
        """)
    )
    assert planned.unit("r").instances == []
    assert planned.unit("r").external == "http://remote.invalid:7777"


# --------------------------------------------------------------------------- allocation


ROLES = """
schema: 2
name: t
frontend: {type: vllm, command: [f]}
roles:
  prefill: {workers: 2, command: [w]}
  decode: {workers: 1, gpus_per_worker: 16, command: [w]}
services:
  - name: pool
    command: [p]
    nodes: 2
"""


def test_allocation_too_small_for_nodes(srt_problem) -> None:
    p = srt_problem(ROLES, nodes=3)
    assert p.label == ""
    assert p.message == (
        "the allocation has 3 node(s) but the recipe needs 6: 2 for prefill, 2 for decode,"
        " 2 for pool pool"
    )
    assert (p.line, p.column) == (1, 1)


def test_allocation_by_default_is_what_the_recipe_needs(srt_plan) -> None:
    planned = srt_plan(ROLES)
    assert [n.name for n in planned.nodes] == [f"node{i}" for i in range(6)]
    assert [n.roles for n in planned.nodes] == [
        ["head", "infra", "client", "prefill"],
        ["prefill"],
        ["decode"],
        ["decode"],
        ["pool:pool"],
        ["pool:pool"],
    ]


def test_larger_allocation_leaves_extra_nodes_unused(srt_plan) -> None:
    planned = srt_plan(ROLES, nodes=8)
    assert len(planned.nodes) == 6


def test_nodelist_too_short(srt_plan) -> None:
    with pytest.raises(RecipeError) as info:
        srt_plan(ROLES, nodelist=("a", "b"))
    assert "the allocation has 2 node(s) but the recipe needs 6" in str(info.value)


def test_nodelist_names_the_nodes(srt_plan) -> None:
    planned = srt_plan(ROLES, nodelist=tuple(f"gpu-{i:02d}" for i in range(6)))
    assert planned.head == "gpu-00"
    assert planned.unit("pool").nodes == ["gpu-04", "gpu-05"]


def test_recipe_needing_more_than_the_cap(srt_problem) -> None:
    p = srt_problem(
        "schema: 2\nname: t\nfrontend: {type: vllm, command: [f]}\n"
        "roles:\n  decode: {workers: 100000, gpus_per_worker: 16, command: [w]}\n"
    )
    assert (
        p.message == "the recipe needs 200000 nodes (200000 for decode); srt plans at most 100000"
    )


def test_explicit_allocation_object(srt_plan) -> None:
    planned = srt_plan(ROLES, allocation=local(6, "j1"))
    assert planned.allocation == "local"
    assert planned.nodes[1].ip == "127.0.0.2"
    with pytest.raises(RecipeError):
        srt_plan(ROLES, allocation=Allocation("local", local(2).nodes))


def test_the_launcher_is_asked_for_the_needed_count(srt_plugins: PluginSet, srt_load) -> None:
    """The composition root asks the launcher for as many nodes as the recipe needs, before
    planning: the planner receives a finished allocation."""
    seen: list[int] = []

    class Counting(LocalLauncher):
        @classmethod
        def allocation(
            cls, request: AllocationRequest, needed: int, settings: Any = None
        ) -> Allocation:
            seen.append(needed)
            return local(needed)

    where = kit.setup(srt_plugins)
    planned = compose.plan(where, srt_load(ROLES), AllocationRequest("local"), launcher=Counting)
    assert seen == [6]
    assert len(planned.plan.nodes) == 6


def test_placement_selecting_no_nodes(srt_problem) -> None:
    p = srt_problem(
        services("""
        - name: a
          command: [a]
          placement: {node: decode}
        """)
    )
    assert p.label == "services[a].placement"
    assert p.message == "placement decode selects no nodes in this job"
    assert (p.line, p.column) == (7, 3)


def test_per_worker_selecting_no_workers(srt_problem) -> None:
    p = srt_problem(
        """
        schema: 2
        name: t
        frontend: {type: vllm, command: [f]}
        roles:
          prefill: {command: [w]}
          decode: {command: [w]}
        services:
          - name: a
            command: [a]
            placement: {node: prefill, per: worker}
            readiness: {log: {pattern: x}}
        """.replace("prefill, per", "agg, per")
    )
    assert p.message == "placement agg selects no workers in this job"


def test_python_is_the_interpreter_srt_runs_under(srt_plan) -> None:
    """A hand-written command finds the packages installed next to srt (a venv that was
    never activated puts another python3 first on PATH)."""
    import sys

    plan = srt_plan(
        {
            "services": [
                {"name": "py", "command": ["{python}", "-m", "mod"], "env": {"PY": "{python}"}}
            ]
        }
    )
    (inst,) = plan.unit("py").instances
    assert inst.argv == [sys.executable, "-m", "mod"]
    assert inst.env["PY"] == sys.executable
