"""Every load-time rule of the nats kind, with the YAML line it is reported at."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from srt_services.testing import LoadedRecipe, RecipeError

Load = Callable[[str], LoadedRecipe]

HEAD = """\
schema: 2
name: v
frontend: {type: sglang, command: [sleep, "1"]}
services:
"""


#: Appended after the services (so the lines above stay put): without srt-exporters the
#: default metrics would add a warning of their own to every recipe here.
NO_METRICS = "observability: {metrics: false}\n"


def errors(load: Load, services: str, head: str = HEAD) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load(head + services)
    return [p.render("recipe.yaml") for p in info.value.errors]


def warnings(load: Load, services: str, head: str = HEAD) -> list[str]:
    loaded = load(head + services + NO_METRICS)
    return [w.render("recipe.yaml") for w in loaded.warnings]


def payload(mb: str) -> str:
    return f"  - name: nats\n    type: nats\n    options:\n      max_payload_mb: {mb}\n"


def test_a_plain_declared_nats_is_valid(srt_load: Load) -> None:
    loaded = srt_load(HEAD + "  - {name: nats, type: nats}\n" + NO_METRICS)
    assert loaded.warnings == []
    (nats,) = loaded.services
    assert (nats.placement, nats.start, nats.critical, nats.stop_grace) == (
        "infra",
        "infra",
        True,
        30.0,
    )


@pytest.mark.parametrize("mb", ["1", "8"])
def test_payloads_up_to_the_recommended_limit_are_quiet(srt_load: Load, mb: str) -> None:
    assert srt_load(HEAD + payload(mb) + NO_METRICS).warnings == []


@pytest.mark.parametrize("mb", ["0", "-3"])
def test_payload_must_be_positive(srt_load: Load, mb: str) -> None:
    assert errors(srt_load, payload(mb)) == [
        f"recipe.yaml:8:7: services[nats].options.max_payload_mb: must be a positive whole"
        f" number of MB, got {mb}"
    ]


@pytest.mark.parametrize(
    ("mb", "shown"), [('"24"', "'24'"), ("2.5", "2.5"), ("true", "true"), ("[4]", "a list")]
)
def test_payload_must_be_a_whole_number(srt_load: Load, mb: str, shown: str) -> None:
    assert errors(srt_load, payload(mb)) == [
        "recipe.yaml:8:7: services[nats].options.max_payload_mb: must be a whole number,"
        f" got {shown}"
    ]


@pytest.mark.parametrize("mb", ["65", "1024"])
def test_payload_above_what_nats_server_accepts_is_refused(srt_load: Load, mb: str) -> None:
    assert errors(srt_load, payload(mb)) == [
        f"recipe.yaml:8:7: services[nats].options.max_payload_mb: {mb} MB is more than"
        " nats-server accepts (64 MB, its max_pending): the server would refuse to start. Send"
        " large data out of band (JetStream object store, shared storage) instead"
    ]


@pytest.mark.parametrize("mb", ["9", "24", "64"])
def test_payload_above_8_mb_warns(srt_load: Load, mb: str) -> None:
    assert warnings(srt_load, payload(mb)) == [
        f"recipe.yaml:8:7: services[nats].options.max_payload_mb: {mb} MB is above the 8 MB"
        " nats-server recommends; it starts, but one large message delays every other message"
        " on its connection"
    ]


def test_monitor_port_must_differ_from_port(srt_load: Load) -> None:
    got = errors(
        srt_load, "  - name: nats\n    type: nats\n    options: {port: 4300, monitor_port: 4300}\n"
    )
    assert got == [
        "recipe.yaml:7:27: services[nats].options.monitor_port: must differ from port (4300):"
        " nats-server binds both"
    ]


def test_monitoring_can_be_switched_off(srt_load: Load) -> None:
    srt_load(HEAD + "  - {name: nats, type: nats, options: {monitor_port: null}}\n")


def test_unknown_option_names_the_known_ones(srt_load: Load) -> None:
    got = errors(srt_load, "  - name: nats\n    type: nats\n    options:\n      max_payload: 4\n")
    assert got == [
        "recipe.yaml:8:7: services[nats].options.max_payload: type 'nats' does not understand"
        " this option; did you mean 'max_payload_mb'?"
    ]
    got = errors(srt_load, "  - name: nats\n    type: nats\n    options:\n      cluster: x\n")
    assert got == [
        "recipe.yaml:8:7: services[nats].options.cluster: type 'nats' does not understand"
        " this option (known: binary, max_payload_mb, monitor_port, port, store_dir)"
    ]


@pytest.mark.parametrize("node", ["prefill", "workers", "all"])
def test_other_placements_are_refused(srt_load: Load, node: str) -> None:
    got = errors(srt_load, f"  - name: nats\n    type: nats\n    placement: {{node: {node}}}\n")
    assert got == [
        f"recipe.yaml:7:17: services[nats].placement.node: type 'nats' must be placed on"
        f" dedicated, head, infra; got '{node}'"
    ]


def test_binary_is_a_name_or_an_absolute_path(srt_load: Load) -> None:
    got = errors(
        srt_load, "  - name: nats\n    type: nats\n    options: {binary: sbin/nats-server}\n"
    )
    assert got == [
        "recipe.yaml:7:15: services[nats].options.binary: must be a command name looked up on"
        " PATH or an absolute path, got 'sbin/nats-server' (a relative path would depend on the"
        " directory srt was started from)"
    ]


@pytest.mark.parametrize("url", ["nats://n:4222", "tls://n:4222", "nats://a:4222,nats://b:4222"])
def test_external_nats_and_tls_urls_are_accepted(srt_load: Load, url: str) -> None:
    srt_load(HEAD + f"  - {{name: nats, type: nats, external: '{url}'}}\n")


def test_external_must_be_a_nats_url(srt_load: Load) -> None:
    got = errors(srt_load, '  - name: nats\n    type: nats\n    external: "http://n:4222"\n')
    assert got == [
        "recipe.yaml:7:5: services[nats].external: must be a nats:// or tls://host:port URL,"
        " got 'http://n:4222'"
    ]


def test_external_servers_are_each_checked(srt_load: Load) -> None:
    got = errors(
        srt_load,
        '  - name: nats\n    type: nats\n    external: "nats://a:4222,http://b:1,nats://c:4222/x"\n',
    )
    assert got == [
        "recipe.yaml:7:5: services[nats].external: endpoint 'http://b:1' must be a nats:// or"
        " tls://host:port URL",
        "recipe.yaml:7:5: services[nats].external: endpoint 'nats://c:4222/x' must be"
        " scheme://host:port only; clients add their own paths",
    ]


def test_external_with_options_warns(srt_load: Load) -> None:
    got = warnings(
        srt_load,
        "  - name: nats\n    type: nats\n    external: nats://n:4222\n"
        "    options: {max_payload_mb: 4}\n",
    )
    assert got == [
        "recipe.yaml:8:15: services[nats].options.max_payload_mb: has no effect with external"
        " (nothing is launched); drop it"
    ]


def test_one_nats_per_job(srt_load: Load) -> None:
    got = errors(srt_load, "  - {name: nats, type: nats}\n  - name: bus\n    type: nats\n")
    assert got == [
        "recipe.yaml:7:5: services[bus].type: a job has one nats (NATS_SERVER names one server);"
        " services[nats] is already one: drop this entry or set enabled: false"
    ]


def test_switching_off_a_nats_a_plane_needs_warns(srt_load: Load) -> None:
    head = HEAD.replace("services:\n", "dynamo: {event_plane: nats}\nservices:\n")
    got = warnings(srt_load, "  - name: nats\n    type: nats\n    enabled: false\n", head)
    assert got == [
        "recipe.yaml:8:5: services[nats].enabled: switches off the NATS that dynamo.event_plane"
        " need; Dynamo processes get no NATS_SERVER unless they set it themselves"
    ]
