"""Services that share a shape: the checks remember what passed, never what failed.

The checker memoises a placement combination that passed and a probe config that
validated, so a generated recipe with thousands of look-alike services pays a lookup for
each. These tests pin down that the memo changes nothing a user can see: every failing
service still gets its own error, and shared answers still carry each service's own names.
"""

from __future__ import annotations

import textwrap

HEAD = "schema: 2\nname: t\nfrontend: {type: none}\nservices:\n"


def services(body: str) -> str:
    return HEAD + textwrap.dedent(body).lstrip("\n")


def test_the_same_bad_placement_is_reported_for_each_service(problems) -> None:
    found = problems(
        services("""
        - {name: a, command: [a], placement: {node: hed}}
        - {name: b, command: [b], placement: {node: hed}}
        """)
    )
    assert [p.label for p in found] == [
        "services[a].placement.node",
        "services[b].placement.node",
    ]
    assert all("got 'hed'" in p.message for p in found)


def test_the_same_bad_probe_config_is_reported_for_each_service(problems) -> None:
    found = problems(
        services("""
        - {name: a, command: [a], readiness: {http: {port: 8080, pth: /h}}}
        - {name: b, command: [b], readiness: {http: {port: 8080, pth: /h}}}
        """)
    )
    assert [p.label for p in found] == [
        "services[a].readiness.http.pth",
        "services[b].readiness.http.pth",
    ]


def test_a_shared_probe_config_still_plans_each_instance_on_its_node(plan) -> None:
    p = plan(
        services("""
        - {name: own-a, nodes: 1, command: [a]}
        - {name: own-b, nodes: 1, command: [b]}
        - {name: a, command: [a], placement: {pool: own-a}, readiness: {http: {port: 81, path: /h}}}
        - {name: b, command: [b], placement: {pool: own-b}, readiness: {http: {port: 81, path: /h}}}
        """)
    )
    a, b = p.unit("a").instances[0], p.unit("b").instances[0]
    assert a.node != b.node
    assert a.readiness is not None and b.readiness is not None
    assert a.readiness.config["host"] == a.node_ip
    assert b.readiness.config["host"] == b.node_ip
    assert a.readiness.config["url"] != b.readiness.config["url"]


def test_a_remembered_placement_keeps_each_service_s_own_pool(plan) -> None:
    p = plan(
        services("""
        - {name: own-a, nodes: 1, command: [a]}
        - {name: own-b, nodes: 1, command: [b]}
        - {name: r1, command: [r], placement: {pool: own-a}}
        - {name: r2, command: [r], placement: {pool: own-b}}
        """)
    )
    assert p.unit("own-a").pool == "own-a"
    assert p.unit("own-b").pool == "own-b"
    assert p.unit("r1").pool == "own-a"
    assert p.unit("r2").pool == "own-b"
    assert p.unit("r1").nodes != p.unit("r2").nodes


def test_equal_but_differently_typed_settings_are_not_shared(problems) -> None:
    # 8080 == 8080.0 == hash-equal: a memo keyed on values alone would let the float through
    found = problems(
        services("""
        - {name: a, command: [a], readiness: {tcp: {port: 8080}}}
        - {name: b, command: [b], readiness: {tcp: {port: 8080.0}}}
        - {name: c, command: [c], readiness: {tcp: {port: 1}}}
        - {name: d, command: [d], readiness: {tcp: {port: true}}}
        """)
    )
    assert [p.label for p in found] == [
        "services[b].readiness.tcp.port",
        "services[d].readiness.tcp.port",
    ]
