"""``SRT_SERVICE_<KEY>_*``: one set of variables per running service, never shared, and
none for a service that does not run (reference-notes §14.18)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any, ClassVar

import pytest
from srt_services.extend import ImpliedService, Recipe, ServiceKind, ServiceSpec, hookimpl
from srt_services.testing import PluginSet, RecipeError, kit

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"


def services(body: str) -> str:
    return HEAD + textwrap.dedent(body).lstrip("\n")


@pytest.mark.parametrize("second", ["a_b", "A_B", "a.b", "A-b"])
def test_names_that_share_their_variables_are_refused_on_both_lines(
    srt_problems: Callable[..., Any], second: str
) -> None:
    found = srt_problems(
        services(f"""
        - name: a-b
          command: [x]
        - name: other
          command: [x]
        - name: "{second}"
          command: [x]
        """)
    )
    assert [(p.label, p.line) for p in found] == [
        ("services[a-b].name", 5),
        (f"services[{second}].name", 9),
    ]
    assert found[0].message == (
        "gives the same SRT_SERVICE_A_B_* variables (what the benchmark is told about each"
        f" service) as services[{second}]; rename one of them"
    )
    assert found[1].message.endswith("as services[a-b]; rename one of them")


def test_three_way_collision_names_the_other_two(srt_problems: Callable[..., Any]) -> None:
    found = srt_problems(
        services("""
        - {name: a-b, command: [x]}
        - {name: a_b, command: [x]}
        - {name: a.b, command: [x]}
        """)
    )
    assert len(found) == 3
    assert "as services[a_b], services[a.b];" in found[0].message


def test_a_switched_off_or_external_service_has_no_variables_to_share(
    srt_load: Callable[..., Any],
) -> None:
    srt_load(
        services("""
        - {name: a-b, command: [x]}
        - {name: a_b, command: [x], enabled: false}
        """)
    )


class Sidecar(ServiceKind):
    name: ClassVar[str] = "x-sidecar"
    summary: ClassVar[str] = "implied by the test plugin"
    skip: ClassVar[str | None] = None

    def command(self, spec: ServiceSpec, options: Any, ctx: Any) -> list[str]:
        return ["sidecar"]

    def skip_reason(self, spec: ServiceSpec, options: Any) -> str | None:
        return Sidecar.skip


class Implies:
    @hookimpl
    def srt_register_service_kinds(self) -> list[type[ServiceKind]]:
        return [Sidecar]

    @hookimpl
    def srt_implied_services(self, recipe: Recipe) -> list[ImpliedService]:
        entry = {
            "name": "node-exporter",
            "type": "x-sidecar",
            "placement": {"node": "all"},
            "metrics": {"port": 9100},
        }
        return [ImpliedService(entry=entry, reason="the test plugin")]


@pytest.fixture
def implying() -> PluginSet:
    return kit.isolated_plugins(Implies(), "implies")


def test_an_entry_that_collides_with_an_implied_service_is_told_which(
    implying: PluginSet,
) -> None:
    with pytest.raises(RecipeError) as info:
        kit.load(
            implying,
            services("""
            - {name: node_exporter, command: [x]}
            """),
            "recipe.yaml",
        )
    (problem,) = [p for p in info.value.errors if p.line == 5]
    assert problem.label == "services[node_exporter].name"
    assert "as services[node-exporter] (implied by the test plugin)" in problem.message


BENCH = """
schema: 2
name: t
frontend: {type: none}
benchmark: {type: command, command: [bench]}
services:
  - {name: router, command: [x]}
"""


def test_a_service_skipped_at_run_time_leaves_the_benchmark_env_and_the_targets(
    implying: PluginSet,
) -> None:
    plan = kit.plan(implying, BENCH, 2, local=True, source="recipe.yaml")
    (bench,) = plan.unit("benchmark").instances
    assert bench.env["SRT_SERVICE_NODE_EXPORTER_NODES"] == "node0"
    assert bench.env["SRT_SERVICE_ROUTER_NODES"] == "node0"
    assert {t.service for t in plan.scrape_targets} == {"node-exporter"}

    # planned to run here, as `srt run` plans: the kind says it cannot run on this machine
    Sidecar.skip = "no sidecar binary on this machine"
    try:
        plan = kit.plan(implying, BENCH, 2, runs_here=True, source="recipe.yaml")
    finally:
        Sidecar.skip = None
    notes = plan.warnings
    assert notes == ["services[node-exporter] skipped: no sidecar binary on this machine"]
    (bench,) = plan.unit("benchmark").instances
    assert not [k for k in bench.env if k.startswith("SRT_SERVICE_NODE_EXPORTER_")]
    assert bench.env["SRT_SERVICE_ROUTER_NODES"] == "node0", "the others stay"
    assert plan.scrape_targets == []
