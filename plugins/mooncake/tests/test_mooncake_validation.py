"""Every load-time rule of the Mooncake kinds, with the YAML line it is reported at."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import pytest
from srt_mooncake.sizes import to_bytes
from srt_services.extend import ServiceKind
from srt_services.testing import LoadedRecipe, PluginSet, RecipeError, kit
from srt_services.testing.kit import ClassesPlugin

Load = Callable[[str], LoadedRecipe]

HEAD = """\
schema: 2
name: v
resources: {gpus_per_node: 1}
frontend: {type: sglang, command: [sleep, "1"]}
roles:
  prefill: {workers: 1, command: [sleep, "1"]}
  decode: {workers: 1, command: [sleep, "1"]}
services:
"""
MASTER = "  - {name: mooncake-master, type: mooncake-master}\n"


def errors(load: Load, services: str) -> list[str]:
    with pytest.raises(RecipeError) as info:
        load(HEAD + services)
    return [p.render("recipe.yaml") for p in info.value.errors]


def warnings(load: Load, services: str) -> list[str]:
    loaded = load(HEAD + services)
    return [w.render("recipe.yaml") for w in loaded.warnings]


def test_a_master_and_a_store_are_valid_with_the_specs_defaults(srt_load: Load) -> None:
    loaded = srt_load(HEAD + MASTER + "  - {name: store, type: mooncake-store}\n")
    assert loaded.warnings == []
    master, store = loaded.services
    assert (master.placement, master.start, master.critical) == ("infra", "before_workers", True)
    # a store defaults to one per worker node, never silently to the head alone
    assert (store.placement, store.start, store.critical) == ("workers", "before_workers", True)


def test_a_store_without_a_master_is_refused_at_its_line(srt_load: Load) -> None:
    got = errors(srt_load, "  - name: store\n    type: mooncake-store\n")
    assert got == [
        "recipe.yaml:10:5: services[store].type: needs a mooncake-master entry: the store"
        " registers with the job's master (declare `- {name: mooncake-master, type:"
        " mooncake-master}`, or one with external: host:port)"
    ]


def test_a_switched_off_master_does_not_count(srt_load: Load) -> None:
    got = errors(
        srt_load,
        "  - {name: mooncake-master, type: mooncake-master, enabled: false}\n"
        "  - {name: store, type: mooncake-store}\n",
    )
    assert len(got) == 1 and "needs a mooncake-master entry" in got[0]


def test_two_masters_are_refused(srt_load: Load) -> None:
    got = errors(
        srt_load, MASTER + "  - {name: second, type: mooncake-master, placement: {node: head}}\n"
    )
    assert got == [
        "recipe.yaml:10:20: services[second].type: a job has one Mooncake master (MOONCAKE_MASTER"
        " names one); services[mooncake-master] is already one: drop this entry or set"
        " enabled: false"
    ]


def test_a_store_declared_before_its_master_is_refused_unless_it_waits(srt_load: Load) -> None:
    store_first = "  - {name: store, type: mooncake-store}\n" + MASTER
    got = errors(srt_load, store_first)
    assert got == [
        "recipe.yaml:9:19: services[store].type: starts before services[mooncake-master] (it is"
        " declared first): declare the store after the master, or write after: [mooncake-master]"
    ]
    srt_load(HEAD + "  - {name: store, type: mooncake-store, after: [mooncake-master]}\n" + MASTER)


def test_a_store_that_starts_in_an_earlier_phase_is_refused(srt_load: Load) -> None:
    got = errors(srt_load, MASTER + "  - {name: store, type: mooncake-store, start: infra}\n")
    assert got == [
        "recipe.yaml:10:41: services[store].start: is infra, before services[mooncake-master]"
        " starts (before_workers): the store registers with the master at start-up"
    ]


def test_an_external_master_has_no_order_to_keep(srt_load: Load) -> None:
    srt_load(
        HEAD
        + "  - {name: store, type: mooncake-store, start: infra}\n"
        + "  - {name: mooncake-master, type: mooncake-master, external: '10.1.2.3:8700'}\n"
    )


@pytest.mark.parametrize("node", ["head", "infra", "dedicated"])
def test_the_master_takes_the_infra_placements(srt_load: Load, node: str) -> None:
    srt_load(HEAD + f"  - {{name: m, type: mooncake-master, placement: {{node: {node}}}}}\n")


@pytest.mark.parametrize("node", ["workers", "prefill", "all"])
def test_the_master_refuses_other_placements(srt_load: Load, node: str) -> None:
    (got,) = errors(
        srt_load, f"  - {{name: m, type: mooncake-master, placement: {{node: {node}}}}}\n"
    )
    assert "type 'mooncake-master' must be placed on dedicated, head, infra" in got


def test_a_store_cannot_have_a_dedicated_node(srt_load: Load) -> None:
    (got,) = errors(
        srt_load, MASTER + "  - {name: s, type: mooncake-store, placement: {node: dedicated}}\n"
    )
    assert "recipe.yaml:10:" in got and "dedicated" in got


class Plane(ServiceKind):
    """A stand-in for etcd/NATS (other plugins): a kind that shares the infra node."""

    name: ClassVar[str] = "x-plane"
    summary: ClassVar[str] = "shares the infra node"
    requires_command: ClassVar[bool] = True
    supports_dedicated: ClassVar[bool] = True
    shares_infra_node: ClassVar[bool] = True


def test_a_written_head_master_beside_a_dedicated_plane_is_refused(
    srt_plugins: PluginSet, srt_load: Load
) -> None:
    srt_plugins.register(ClassesPlugin([Plane]), "plane")
    got = errors(
        srt_load,
        "  - {name: plane, type: x-plane, command: [x], placement: {node: dedicated}}\n"
        "  - {name: mooncake-master, type: mooncake-master, placement: {node: head}}\n",
    )
    assert got == [
        "recipe.yaml:10:52: services[mooncake-master].placement: services plane and"
        " mooncake-master must agree on placement.node: dedicated (they share the infra node)"
    ]
    loaded = srt_load(
        HEAD
        + "  - {name: plane, type: x-plane, command: [x], placement: {node: dedicated}}\n"
        + "  - {name: mooncake-master, type: mooncake-master, placement: {node: dedicated}}\n"
    )
    assert [s.placement for s in loaded.services] == ["dedicated", "dedicated"]


def test_the_specs_dedicated_example_loads_and_the_master_follows_to_the_dedicated_node(
    srt_plugins: PluginSet, srt_load: Load
) -> None:
    """The specification's example: the discovery plane on a dedicated node and a declared
    master with its default placement; the master shares the reserved node with them."""
    srt_plugins.register(ClassesPlugin([Plane]), "plane")
    text = (
        HEAD
        + "  - {name: plane, type: x-plane, command: [x], placement: {node: dedicated}}\n"
        + MASTER
    )
    loaded = srt_load(text)
    assert [s.placement for s in loaded.services] == ["dedicated", "infra"]
    plan = kit.plan(srt_plugins, text)
    nodes = {u.name: [i.node for i in u.instances] for u in plan.units}
    assert nodes["plane"] == nodes["mooncake-master"] == ["node0"]
    workers = {
        i.node for u in plan.units if u.name.startswith(("prefill", "decode")) for i in u.instances
    }
    assert "node0" not in workers


@pytest.mark.parametrize(
    ("external", "message"),
    [
        ("http://10.0.0.5:8700", "without a scheme"),
        ("10.0.0.5", "must be host:port"),
        ("10.0.0.5:99999", "must be host:port"),
        ("[fd00::5]:8700x", "must be host:port"),
    ],
)
def test_a_bad_external_master_address_is_refused(
    srt_load: Load, external: str, message: str
) -> None:
    (got,) = errors(srt_load, f"  - {{name: m, type: mooncake-master, external: '{external}'}}\n")
    assert got.startswith("recipe.yaml:9:") and "services[m].external: " in got
    assert message in got


@pytest.mark.parametrize("external", ["10.0.0.5:8700", "mc.example:50051", "[fd00::5]:8700"])
def test_good_external_master_addresses(srt_load: Load, external: str) -> None:
    srt_load(HEAD + f"  - {{name: m, type: mooncake-master, external: '{external}'}}\n")


def test_external_keeps_what_consumers_are_told_and_warns_about_the_rest(srt_load: Load) -> None:
    got = warnings(
        srt_load,
        "  - name: m\n    type: mooncake-master\n    external: 10.0.0.5:8700\n"
        "    options: {metadata_port: 9701, protocol: rdma, rpc_thread_num: 4}\n",
    )
    assert got == [
        "recipe.yaml:12:52: services[m].options.rpc_thread_num: has no effect with external"
        " (nothing is launched); drop it"
    ]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("eviction_high_watermark_ratio: 0", "must be more than 0 and at most 1"),
        ("eviction_high_watermark_ratio: 1.5", "must be more than 0 and at most 1"),
        ("default_kv_lease_ttl: 0", "must be a positive whole number"),
        ("rpc_thread_num: -1", "must be a positive whole number"),
        ("protocol: RDMA", "in lower case"),
        ("rpc_port: 70000", "must be at most 65535"),
        ("metrics_port: 8700", "must differ from rpc_port (8700)"),
        ("store_config: {global_segment_size: 4GN}", "a size such as '256MB'"),
        ("store_config: {global_segment_sise: 4GB}", "global_segment_sise"),
        ("no_such: 1", "type 'mooncake-master' does not understand"),
    ],
)
def test_master_options_are_checked(srt_load: Load, option: str, message: str) -> None:
    got = errors(srt_load, f"  - name: m\n    type: mooncake-master\n    options: {{{option}}}\n")
    assert any(message in g and "recipe.yaml:11:" in g for g in got), got


def test_store_config_master_address_is_srts_to_write(srt_load: Load) -> None:
    got = warnings(
        srt_load,
        "  - name: m\n    type: mooncake-master\n"
        "    options: {store_config: {master_server_address: '1.2.3.4:1'}}\n",
    )
    assert got == [
        "recipe.yaml:11:30: services[m].options.store_config.master_server_address: is written"
        " by srt (this master's RPC address); drop it"
    ]


@pytest.mark.parametrize(
    ("entry", "where", "message"),
    [
        ("args: [--port, x80]", "args", "--port 'x80' is not a port"),
        ("args: [--port=0]", "args", "--port '0' is not a port"),
        ("options: {port: 8810}, args: [--port, '8811']", "options.port", "give the port once"),
        ("options: {global_segment_size: -1}", "options.global_segment_size", "0 bytes or more"),
        ("options: {local_buffer_size: true}", "options.local_buffer_size", "byte count"),
    ],
)
def test_store_options_are_checked(srt_load: Load, entry: str, where: str, message: str) -> None:
    got = errors(srt_load, MASTER + f"  - {{name: s, type: mooncake-store, {entry}}}\n")
    assert any(f"services[s].{where}: " in g and message in g for g in got), got


def test_a_store_port_given_once_in_args_agrees_with_itself(srt_load: Load) -> None:
    srt_load(
        HEAD
        + MASTER
        + "  - {name: s, type: mooncake-store, options: {port: 8810}, args: [--port, '8810']}\n"
    )


def test_store_warnings(srt_load: Load) -> None:
    got = warnings(
        srt_load,
        MASTER
        + "  - name: s\n    type: mooncake-store\n    command: [python3, -m, mooncake.mooncake_store_service]\n"
        "    options: {global_segment_size: 1gb}\n    env: {MOONCAKE_GLOBAL_SEGMENT_SIZE: 2gb}\n",
    )
    assert got == [
        "recipe.yaml:12:5: services[s].command: has no --port: srt probes and claims the REST"
        " port 8800, and the store service listens on 8080 unless told otherwise",
        "recipe.yaml:14:11: services[s].env.MOONCAKE_GLOBAL_SEGMENT_SIZE: is overridden by"
        " options.global_segment_size, which the store's config file carries (the store reads"
        " the file, not this variable)",
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (0, 0),
        (3355443200, 3355443200),
        ("256MB", 256 * 1024**2),
        ("100gb", 100 * 1024**3),
        ("1.5g", int(1.5 * 1024**3)),
        (" 4 KB ", 4096),
        ("4096", 4096),
        ("2t", 2 * 1024**4),
    ],
)
def test_sizes_read_like_mooncake_reads_them(given: int | str, expected: int) -> None:
    assert to_bytes(given) == expected


@pytest.mark.parametrize("given", ["", "gb", "4GN", "-1", "nan", "inf", True, 1.5, None])
def test_sizes_that_are_not(given: object) -> None:
    with pytest.raises(ValueError, match="must be"):
        to_bytes(given)
