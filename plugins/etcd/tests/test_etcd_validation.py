"""Every load-time rule of the etcd kind, with the YAML line it is reported at."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from srt_services.testing import LoadedRecipe, RecipeError

Load = Callable[[str], LoadedRecipe]

HEAD = """\
schema: 2
name: v
frontend: {type: dynamo, command: [sleep, "1"]}
services:
"""


#: Appended after the services (so the lines above stay put): without srt-exporters the
#: default metrics would add a warning of their own to every recipe here.
NO_METRICS = "observability: {metrics: false}\n"


def errors(load: Load, services: str) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load(HEAD + services)
    return [p.render("recipe.yaml") for p in info.value.errors]


def warnings(load: Load, services: str) -> list[str]:
    loaded = load(HEAD + services + NO_METRICS)
    return [w.render("recipe.yaml") for w in loaded.warnings]


def test_a_plain_declared_etcd_is_valid(srt_load: Load) -> None:
    loaded = srt_load(HEAD + "  - {name: etcd, type: etcd}\n" + NO_METRICS)
    assert loaded.warnings == []
    (etcd,) = loaded.services
    assert (etcd.placement, etcd.start, etcd.critical, etcd.stop_grace) == (
        "infra",
        "infra",
        True,
        30.0,
    )


@pytest.mark.parametrize("node", ["head", "infra", "dedicated"])
def test_the_infra_placements_are_accepted(srt_load: Load, node: str) -> None:
    srt_load(HEAD + f"  - {{name: etcd, type: etcd, placement: {{node: {node}}}}}\n")


@pytest.mark.parametrize("node", ["workers", "agg", "all", "compute"])
def test_other_placements_are_refused(srt_load: Load, node: str) -> None:
    got = errors(srt_load, f"  - name: etcd\n    type: etcd\n    placement: {{node: {node}}}\n")
    assert got == [
        f"recipe.yaml:7:17: services[etcd].placement.node: type 'etcd' must be placed on"
        f" dedicated, head, infra; got '{node}'"
    ]


def test_a_pool_of_its_own_is_refused(srt_load: Load) -> None:
    got = errors(srt_load, "  - name: etcd\n    type: etcd\n    nodes: 2\n")
    assert got == [
        "recipe.yaml:7:5: services[etcd].nodes: type 'etcd' must be placed on dedicated, head,"
        " infra; got 'workers'"
    ]


def test_unknown_option_names_the_known_ones(srt_load: Load) -> None:
    got = errors(srt_load, "  - name: etcd\n    type: etcd\n    options:\n      clientport: 1\n")
    assert got == [
        "recipe.yaml:8:7: services[etcd].options.clientport: type 'etcd' does not understand"
        " this option; did you mean 'client_port'?"
    ]
    got = errors(srt_load, "  - name: etcd\n    type: etcd\n    options:\n      wal: /x\n")
    assert got == [
        "recipe.yaml:8:7: services[etcd].options.wal: type 'etcd' does not understand"
        " this option (known: binary, client_port, data_dir, peer_port)"
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"2379"', "must be a whole number, got '2379'"),
        ("0", "must be at least 1, got 0"),
        ("70000", "must be at most 65535, got 70000"),
    ],
)
def test_ports_are_typed_and_ranged(srt_load: Load, value: str, message: str) -> None:
    got = errors(
        srt_load, f"  - name: etcd\n    type: etcd\n    options:\n      client_port: {value}\n"
    )
    assert got == [f"recipe.yaml:8:7: services[etcd].options.client_port: {message}"]


def test_client_and_peer_port_must_differ(srt_load: Load) -> None:
    got = errors(
        srt_load,
        "  - name: etcd\n    type: etcd\n    options:\n      client_port: 2400\n"
        "      peer_port: 2400\n",
    )
    assert got == [
        "recipe.yaml:9:7: services[etcd].options.peer_port: must differ from client_port"
        " (2400): etcd binds both"
    ]


@pytest.mark.parametrize(
    ("binary", "message"),
    [
        (
            '"bin/etcd"',
            "must be a command name looked up on PATH or an absolute path, got"
            " 'bin/etcd' (a relative path would depend on the directory srt was started from)",
        ),
        ('" "', "must not be blank (omit it to use the default)"),
    ],
)
def test_binary_is_a_name_or_an_absolute_path(srt_load: Load, binary: str, message: str) -> None:
    got = errors(
        srt_load, f"  - name: etcd\n    type: etcd\n    options:\n      binary: {binary}\n"
    )
    assert got == [f"recipe.yaml:8:7: services[etcd].options.binary: {message}"]


@pytest.mark.parametrize("binary", ["etcd", "/usr/bin/etcd", "etcd-3.5"])
def test_good_binaries_pass(srt_load: Load, binary: str) -> None:
    srt_load(HEAD + f"  - {{name: etcd, type: etcd, options: {{binary: {binary}}}}}\n")


def test_external_must_be_an_http_url(srt_load: Load) -> None:
    got = errors(srt_load, '  - name: etcd\n    type: etcd\n    external: "nats://x:2379"\n')
    assert got == [
        "recipe.yaml:7:5: services[etcd].external: must be a http:// or https://host:port URL,"
        " got 'nats://x:2379'"
    ]


def test_external_with_a_broken_ipv6_host_is_an_error_not_a_crash(srt_load: Load) -> None:
    got = errors(srt_load, '  - name: etcd\n    type: etcd\n    external: "http://[fd00::1:2379"\n')
    assert got == [
        "recipe.yaml:7:5: services[etcd].external: must be a http:// or https://host:port URL,"
        " got 'http://[fd00::1:2379'"
    ]


def test_external_endpoints_are_each_checked(srt_load: Load) -> None:
    got = errors(
        srt_load,
        '  - name: etcd\n    type: etcd\n    external: "http://a:2379/v3, ftp://b:1, http://c:x"\n',
    )
    assert got == [
        "recipe.yaml:7:5: services[etcd].external: endpoint 'http://a:2379/v3' must be"
        " scheme://host:port only; clients add their own paths",
        "recipe.yaml:7:5: services[etcd].external: endpoint 'ftp://b:1' must be a http:// or"
        " https://host:port URL",
        "recipe.yaml:7:5: services[etcd].external: endpoint 'http://c:x' has an invalid port",
    ]


def test_several_external_endpoints_are_fine(srt_load: Load) -> None:
    srt_load(HEAD + '  - {name: etcd, type: etcd, external: "http://a:2379,https://b:2379"}\n')


def test_external_refuses_what_would_launch(srt_load: Load) -> None:
    got = errors(
        srt_load,
        '  - name: etcd\n    type: etcd\n    external: "http://a:2379"\n    args: [--debug]\n',
    )
    assert got == [
        "recipe.yaml:8:5: services[etcd].args: has no effect with external (nothing is"
        " launched); drop it"
    ]


def test_external_with_options_warns(srt_load: Load) -> None:
    got = warnings(
        srt_load,
        '  - name: etcd\n    type: etcd\n    external: "http://a:2379"\n'
        "    options: {client_port: 2400}\n",
    )
    assert got == [
        "recipe.yaml:8:15: services[etcd].options.client_port: has no effect with external"
        " (nothing is launched); drop it"
    ]


def test_own_command_with_binary_warns(srt_load: Load) -> None:
    got = warnings(
        srt_load,
        "  - name: etcd\n    type: etcd\n    command: [/opt/etcd, --data-dir, /tmp/e]\n"
        "    options: {binary: /usr/bin/etcd}\n",
    )
    assert got == [
        "recipe.yaml:8:15: services[etcd].options.binary: has no effect: the recipe's command"
        " replaces the kind's command"
    ]


def test_one_etcd_per_job(srt_load: Load) -> None:
    got = errors(srt_load, "  - {name: etcd, type: etcd}\n  - name: registry\n    type: etcd\n")
    assert got == [
        "recipe.yaml:7:5: services[registry].type: a job has one etcd (ETCD_ENDPOINTS names one"
        " discovery plane); services[etcd] is already one: drop this entry or set enabled: false"
    ]


def test_a_disabled_second_etcd_is_fine(srt_load: Load) -> None:
    srt_load(HEAD + "  - {name: etcd, type: etcd}\n  - {name: spare, type: etcd, enabled: false}\n")


def test_switching_off_the_implied_etcd_warns(srt_load: Load) -> None:
    got = warnings(srt_load, "  - name: etcd\n    type: etcd\n    enabled: false\n")
    assert got == [
        "recipe.yaml:7:5: services[etcd].enabled: switches off the etcd that frontend.type"
        " dynamo needs; Dynamo processes get no ETCD_ENDPOINTS unless they set it themselves"
    ]


def test_all_problems_are_reported_together(srt_load: Load) -> None:
    got = errors(
        srt_load,
        "  - name: etcd\n    type: etcd\n    placement: {node: decode}\n"
        "    options: {binary: ./etcd, peer_port: 2379}\n",
    )
    assert got == [
        "recipe.yaml:7:17: services[etcd].placement.node: type 'etcd' must be placed on"
        " dedicated, head, infra; got 'decode'",
        "recipe.yaml:8:15: services[etcd].options.binary: must be a command name looked up on"
        " PATH or an absolute path, got './etcd' (a relative path would depend on the directory"
        " srt was started from)",
        "recipe.yaml:8:31: services[etcd].options.peer_port: must differ from client_port"
        " (2379): etcd binds both",
    ]


def test_beside_a_shape_error_a_declared_etcd_keeps_the_implied_type(srt_load: Load) -> None:
    # checked without the broken entry, `etcd` still takes the implied type (no "command is
    # required for type generic"), and the implied services themselves are not reported
    got = errors(
        srt_load, "  - name: etcd\n    placement: {node: dedicated}\n  - name: x\n    bogus: 1\n"
    )
    assert len(got) == 1
    assert got[0].startswith("recipe.yaml:8:5: services[x].bogus: unknown key")


def test_beside_a_shape_error_the_kinds_own_rules_wait(srt_load: Load) -> None:
    # the core's rules of the sound entry are reported; the kind's `validate` (which may
    # look at other entries) runs once the recipe's shape is whole
    got = errors(
        srt_load,
        "  - name: etcd\n    type: etcd\n    placement: {node: decode}\n"
        "    options: {client_port: 2400, peer_port: 2400}\n  - name: x\n    bogus: 1\n",
    )
    assert [line.split(": ")[:2] for line in got] == [
        ["recipe.yaml:7:17", "services[etcd].placement.node"],
        ["recipe.yaml:10:5", "services[x].bogus"],
    ]
