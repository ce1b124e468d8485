"""``metrics`` annotations: placeholders in paths, several endpoints, metrics switched off."""

from __future__ import annotations

import textwrap

from srt_services.recipe.problems import LocatedProblem

HEAD = "schema: 2\nname: t\nframe: x\n"


def recipe(body: str) -> str:
    return textwrap.dedent(body).lstrip("\n")


def test_unknown_placeholder_in_a_service_metrics_path_is_refused_with_its_line(
    srt_problem,
) -> None:
    p: LocatedProblem = srt_problem(
        recipe("""
        schema: 2
        name: t
        services:
          - name: side
            command: [a]
            metrics: {port: 9000, path: "/m/{nod}"}
        """)
    )
    assert p.label == "services[side].metrics.path"
    assert "unknown placeholder {nod}" in p.message and "{node}" in p.message
    assert p.line == 6


def test_known_placeholders_render_per_node(srt_plan) -> None:
    planned = srt_plan(
        recipe("""
        schema: 2
        name: t
        services:
          - name: side
            command: [a]
            nodes: 2
            metrics: {port: 9000, path: "/m/{node}/{index}"}
        """)
    )
    assert [t.url.split(":9000")[1] for t in planned.scrape_targets] == ["/m/node0/0", "/m/node1/1"]
    assert [t.step for t in planned.scrape_targets] == ["service_side_node0", "service_side_node1"]


def test_worker_placeholders_only_for_roles(srt_problem, srt_plan) -> None:
    p = srt_problem(
        recipe("""
        schema: 2
        name: t
        frontend: {type: sglang, command: [f], metrics: {port: 9000, path: "/{worker_index}"}}
        roles: {agg: {command: [w]}}
        """)
    )
    assert p.label == "frontend.metrics.path"
    assert "only known to instances attached to a worker" in p.message
    planned = srt_plan(
        recipe("""
        schema: 2
        name: t
        resources: {gpus_per_node: 2}
        frontend: {type: sglang, command: [f]}
        roles: {agg: {workers: 2, gpus_per_worker: 1, command: [w], port: 7000, metrics: {port: 9000, path: "/w{worker_index}"}}}
        """)
    )
    by_name = {t.name: t for t in planned.scrape_targets}
    # two workers on one node: the second serves on base+1, like its own port
    assert by_name["agg_0_node0"].url == "http://<node0-ip>:9000/w0"
    assert by_name["agg_1_node0"].url == "http://<node0-ip>:9001/w1"
    assert by_name["agg_1_node0"].role == "agg"
    ports = {(e["port"], e["step"]) for e in planned.ports}
    assert {(9000, "agg_0"), (9001, "agg_1"), (7000, "agg_0"), (7001, "agg_1")} <= ports


def test_a_worker_metrics_port_is_in_the_ledger(srt_problem) -> None:
    p = srt_problem(
        recipe("""
        schema: 2
        name: t
        frontend: {type: sglang, command: [f]}
        roles: {agg: {command: [w], metrics: {port: 9500}}}
        services:
          - name: side
            command: [a]
            placement: {node: workers}
            readiness: {port: 9500}
        """)
    )
    assert "both listen on port 9500" in p.message


def test_metrics_while_metrics_are_off_is_a_warning(srt_load) -> None:
    loaded = srt_load(
        recipe("""
        schema: 2
        name: t
        observability: {metrics: false}
        services:
          - name: side
            command: [a]
            metrics: {port: 9000}
        """)
    )
    assert [(w.label, w.line) for w in loaded.warnings] == [("services[side].metrics", 7)]
    assert "observability.metrics is false" in loaded.warnings[0].message


def test_metrics_off_plans_no_targets(srt_plan) -> None:
    text = """
        schema: 2
        name: t
        observability: %s
        frontend: {type: sglang, command: [f], metrics: {port: 9000}}
        roles: {agg: {command: [w], metrics: {port: 9100}}}
        services:
          - {name: side, command: [a], metrics: {port: 9200}}
        """
    on = srt_plan(recipe(text % "{}"))  # on by default: srt-exporters need not be installed
    assert {t.service for t in on.scrape_targets} == {"frontend", "agg", "side"}
    assert {t.role for t in on.scrape_targets} == {"frontend", "agg", "service"}
    assert srt_plan(recipe(text % "{metrics: false}")).scrape_targets == []


def test_several_endpoints_need_distinct_names(srt_problem) -> None:
    p = srt_problem(
        recipe("""
        schema: 2
        name: t
        services:
          - name: side
            command: [a]
            metrics: [{port: 9000}, {port: 9001}]
        """)
    )
    assert p.label == "services[side].metrics"
    assert "give each a distinct name" in p.message
