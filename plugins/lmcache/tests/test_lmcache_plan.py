"""What the lmcache-server kind makes of a recipe: implied entries, argv, probe, ports, env,
and what SGLang workers are told. Pure: plans are resolved in-process, nothing starts."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from srt_services.extend import Plan, PlannedUnit
from srt_services.testing import LoadedRecipe, RecipeError

MakePlan = Callable[..., Plan]
Load = Callable[[str], LoadedRecipe]

#: prefill (2 workers on node0), decode (1 worker on node1); metrics off (no srt-exporters).
VLLM = """\
schema: 2
name: p
engine: {type: vllm%s}
observability: {metrics: false}
frontend: {type: vllm, command: [sleep, "1"]}
roles:
  prefill: {workers: 2, gpus_per_worker: 4, command: [w]%s}
  decode: {workers: 1, command: [w]%s}
"""


def vllm(engine: str = "", prefill: str = "", decode: str = "", services: str = "") -> str:
    return VLLM % (engine, prefill, decode) + (f"services:\n{services}" if services else "")


def unit(plan: Plan, name: str) -> PlannedUnit:
    return next(u for u in plan.units if u.name == name)


def names(plan: Plan) -> list[str]:
    return [u.name for u in plan.units if u.category == "service"]


# --------------------------------------------------------------------------- implied


def test_one_role_with_lmcache_mp_gets_a_server_on_its_nodes(srt_plan: MakePlan) -> None:
    p = srt_plan(vllm(decode=", connector: lmcache-mp"))
    u = unit(p, "lmcache-server")
    assert u.implied_by == "decode connector lmcache-mp"
    assert (u.placement, u.phase, u.critical, u.type) == (
        "decode", "before_workers", True, "lmcache-server",
    )  # fmt: skip
    assert u.nodes == ["node1"]
    assert [i.step for i in u.instances] == ["service_lmcache-server"]


def test_several_roles_share_one_server_per_worker_node(srt_plan: MakePlan) -> None:
    p = srt_plan(vllm(engine=", connector: lmcache-mp"))
    u = unit(p, "lmcache-server")
    assert u.implied_by == "prefill connector lmcache-mp, decode connector lmcache-mp"
    assert u.placement == "workers"
    # two prefill workers on node0 share node0's server: one instance per node
    assert [(i.step, i.node) for i in u.instances] == [
        ("service_lmcache-server_node0", "node0"),
        ("service_lmcache-server_node1", "node1"),
    ]


def test_a_role_that_opts_out_is_not_served(srt_plan: MakePlan) -> None:
    p = srt_plan(vllm(engine=", connector: lmcache-mp", prefill=", connector: nixl"))
    u = unit(p, "lmcache-server")
    assert (u.implied_by, u.placement) == ("decode connector lmcache-mp", "decode")


@pytest.mark.parametrize("connector", ["nixl", "lmcache", "mooncake", "none"])
def test_other_connectors_imply_nothing(srt_plan: MakePlan, connector: str) -> None:
    assert names(srt_plan(vllm(engine=f", connector: {connector}"))) == []


def test_lmcache_mp_with_sglang_is_refused_not_ignored(srt_load: Load) -> None:
    text = vllm(decode=", connector: lmcache-mp").replace("type: vllm}", "type: sglang}")
    with pytest.raises(RecipeError) as info:
        srt_load(text)
    (p,) = info.value.errors
    assert p.label == "roles.decode.connector"
    assert "is a vLLM KV connector, but engine.type is sglang" in p.message


def test_a_declared_server_of_any_name_replaces_the_implied_one(srt_plan: MakePlan) -> None:
    p = srt_plan(
        vllm(
            decode=", connector: lmcache-mp",
            services="  - {name: cache, type: lmcache-server, options: {l1_size_gb: 2}}\n",
        )
    )
    assert names(p) == ["cache"]
    assert unit(p, "cache").implied_by is None


def test_a_declared_entry_by_name_changes_the_implied_one(srt_plan: MakePlan) -> None:
    p = srt_plan(
        vllm(
            decode=", connector: lmcache-mp",
            services="  - {name: lmcache-server, placement: {node: decode},"
            " options: {l1_size_gb: 0.5}}\n",
        )
    )
    u = unit(p, "lmcache-server")
    assert u.replaces_implied == "decode connector lmcache-mp"
    assert u.type == "lmcache-server"
    assert "0.5" in u.instances[0].argv


def test_enabled_false_switches_it_off(srt_plan: MakePlan) -> None:
    p = srt_plan(
        vllm(
            decode=", connector: lmcache-mp",
            services="  - {name: lmcache-server, enabled: false}\n",
        )
    )
    assert names(p) == []


# --------------------------------------------------------------------------- the server


def test_argv_probe_ports_and_env_on_a_virtual_node(srt_plan: MakePlan) -> None:
    p = srt_plan(vllm(decode=", connector: lmcache-mp"))
    (inst,) = unit(p, "lmcache-server").instances
    # decode is on node1 = 127.0.0.2: loopback, so the request port binds the node's own
    # address and every virtual node can run one
    assert inst.argv == [
        "lmcache", "server",
        "--host", "127.0.0.2", "--port", "8750",
        "--http-host", "127.0.0.2", "--http-port", "8751",
        "--l1-size-gb", "8", "--eviction-policy", "LRU",
    ]  # fmt: skip
    assert inst.ports == [8750, 8751]
    probe = inst.readiness
    assert probe is not None
    assert (probe.probe, probe.config["url"], probe.config["status"]) == (
        "http", "http://127.0.0.2:8751/healthcheck", 200,
    )  # fmt: skip
    assert (probe.timeout, probe.interval) == (300.0, 0.25)
    assert inst.env["LMCACHE_TRACK_USAGE"] == "false"
    assert inst.env["DO_NOT_TRACK"] == "1"
    assert unit(p, "lmcache-server").metrics == [
        {"port": 8751, "path": "/metrics", "nodes": "all", "name": None}
    ]


def test_on_a_cluster_node_the_request_port_binds_every_interface(srt_plan: MakePlan) -> None:
    p = srt_plan(vllm(decode=", connector: lmcache-mp"), local=False)
    (inst,) = unit(p, "lmcache-server").instances
    assert inst.argv[2:4] == ["--host", "0.0.0.0"]  # vLLM's connector dials localhost
    assert inst.argv[6:8] == ["--http-host", "<node1-ip>"]  # the admin API stays on the node IP


def test_options_ports_l1_and_binds(srt_plan: MakePlan) -> None:
    entry = (
        "  - name: lmcache-server\n"
        "    placement: {node: decode}\n"
        "    options: {port: 9000, http_port: 9001, l1_size_gb: 0.25, eviction_policy: ARC,"
        " host: 10.1.2.3, http_host: 10.1.2.4, binary: /opt/lmc/bin/lmcache}\n"
        "    args: [--chunk-size, '512']\n"
    )
    p = srt_plan(vllm(decode=", connector: lmcache-mp", services=entry))
    (inst,) = unit(p, "lmcache-server").instances
    assert inst.argv == [
        "/opt/lmc/bin/lmcache", "server",
        "--host", "10.1.2.3", "--port", "9000",
        "--http-host", "10.1.2.4", "--http-port", "9001",
        "--l1-size-gb", "0.25", "--eviction-policy", "ARC",
        "--chunk-size", "512",
    ]  # fmt: skip
    assert inst.ports == [9000, 9001]


def test_l1_manager_in_args_replaces_the_legacy_l1_flags(srt_plan: MakePlan) -> None:
    entry = '  - {name: lmcache-server, args: [--l1-manager, \'{"type": "DRAM"}\']}\n'
    p = srt_plan(vllm(decode=", connector: lmcache-mp", services=entry))
    argv = unit(p, "lmcache-server").instances[0].argv
    assert "--l1-size-gb" not in argv and "--eviction-policy" not in argv
    assert argv[-2:] == ["--l1-manager", '{"type": "DRAM"}']


def test_telemetry_cannot_be_switched_back_on(srt_plan: MakePlan) -> None:
    entry = "  - {name: lmcache-server, env: {LMCACHE_TRACK_USAGE: 'true', MY: x}}\n"
    p = srt_plan(vllm(decode=", connector: lmcache-mp", services=entry))
    u = unit(p, "lmcache-server")
    assert u.instances[0].env["LMCACHE_TRACK_USAGE"] == "false"
    assert u.instances[0].env["MY"] == "x"
    assert any("LMCACHE_TRACK_USAGE" in w for w in u.warnings)


def test_the_ports_are_in_the_ledger(srt_load: Load, srt_plan: MakePlan) -> None:
    clash = "  - {name: other, command: [x], placement: {node: decode}, readiness: {port: 8751}}\n"
    with pytest.raises(RecipeError) as info:
        srt_plan(vllm(decode=", connector: lmcache-mp", services=clash))
    assert "both listen on port 8751 on node node1" in str(info.value)


# --------------------------------------------------------------------------- SGLang workers

SGLANG = """\
schema: 2
name: s
engine: {type: sglang}
observability: {metrics: false}
frontend: {type: sglang, command: [sleep, "1"]}
roles:
  prefill: {workers: 2, gpus_per_worker: 4, command: [python3, -m, sglang.launch_server]%s}
  decode: {workers: 1, command: [python3, -m, sglang.launch_server]%s}
services:
  - {name: cache, type: lmcache-server%s}
"""


def sglang(prefill: str = "", decode: str = "", server: str = "") -> str:
    return SGLANG % (prefill, decode, server)


def test_sglang_workers_with_enable_lmcache_learn_the_address(srt_plan: MakePlan) -> None:
    p = srt_plan(sglang(prefill=", args: [--enable-lmcache]", server=", options: {port: 9750}"))
    envs = {i.step: i.env for i in unit(p, "prefill").instances}
    # rendered per worker: each reaches the server on its own node
    assert envs["prefill_0"]["LMCACHE_MP_HOST"] == "127.0.0.1"
    assert envs["prefill_0"]["LMCACHE_MP_PORT"] == "9750"
    assert envs["prefill_1"]["LMCACHE_MP_HOST"] == "127.0.0.1"
    # decode does not enable LMCache: told nothing
    assert "LMCACHE_MP_HOST" not in unit(p, "decode").instances[0].env


def test_sglang_decode_worker_gets_its_own_node(srt_plan: MakePlan) -> None:
    p = srt_plan(sglang(decode=", args: [--enable-lmcache]"))
    env = unit(p, "decode").instances[0].env
    assert (env["LMCACHE_MP_HOST"], env["LMCACHE_MP_PORT"]) == ("127.0.0.2", "8750")


@pytest.mark.parametrize(
    "decode",
    [
        ", args: [--enable-lmcache, --lmcache-config-file, /cfg/lmc.yaml]",
        ", args: [--enable-lmcache, '--lmcache-config-file=/cfg/lmc.yaml']",
        ", args: [--enable-lmcache], env: {LMCACHE_MP_HOST: 10.9.9.9}",
    ],
)
def test_sglang_config_of_its_own_wins(srt_plan: MakePlan, decode: str) -> None:
    env = unit(srt_plan(sglang(decode=decode)), "decode").instances[0].env
    assert "LMCACHE_MP_PORT" not in env
    assert env.get("LMCACHE_MP_HOST") in (None, "10.9.9.9")


def test_recipe_env_wins_over_what_the_server_tells(srt_plan: MakePlan) -> None:
    p = srt_plan(sglang(decode=", args: [--enable-lmcache], env: {LMCACHE_MP_PORT: '7777'}"))
    env = unit(p, "decode").instances[0].env
    assert (env["LMCACHE_MP_HOST"], env["LMCACHE_MP_PORT"]) == ("127.0.0.2", "7777")


def test_a_server_on_the_head_is_reached_at_the_head(srt_plan: MakePlan) -> None:
    p = srt_plan(sglang(decode=", args: [--enable-lmcache]", server=", placement: {node: head}"))
    assert unit(p, "decode").instances[0].env["LMCACHE_MP_HOST"] == "127.0.0.1"
    assert unit(p, "cache").nodes == ["node0"]


def test_a_server_on_another_role_tells_this_one_nothing(srt_plan: MakePlan) -> None:
    p = srt_plan(sglang(decode=", args: [--enable-lmcache]", server=", placement: {node: prefill}"))
    assert "LMCACHE_MP_HOST" not in unit(p, "decode").instances[0].env


def test_vllm_workers_are_told_nothing(srt_plan: MakePlan) -> None:
    p = srt_plan(vllm(decode=", connector: lmcache-mp"))
    assert "LMCACHE_MP_HOST" not in unit(p, "decode").instances[0].env
