"""What the Mooncake kinds make of a recipe: argv, probes, ports, files, and the environment
of every process that talks to the master.

Pure: plans are resolved in-process against local (127.0.0.x) or symbolic nodes; nothing
starts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from srt_services.extend import LAST_TIER, Plan, PlannedInstance, PlannedUnit
from srt_services.testing import RecipeError, kit

MakePlan = Callable[..., Plan]

JOB = """\
schema: 2
name: p
resources: {gpus_per_node: 1}
frontend: {type: sglang, command: [sleep, "1"]}
roles:
  prefill: {workers: 1, command: [sleep, "1"]}
  decode: {workers: 2, command: [sleep, "1"], env: {ROLE_ONLY: "1"}}
benchmark: {type: command, command: [sleep, "1"]}
services:
"""
MASTER = "  - {name: mooncake-master, type: mooncake-master}\n"
MOONCAKE_KEYS = ("MOONCAKE_MASTER", "MOONCAKE_TE_META_DATA_SERVER", "MOONCAKE_PROTOCOL")


def unit(plan: Plan, name: str) -> PlannedUnit:
    return next(u for u in plan.units if u.name == name)


def only(plan: Plan, name: str) -> PlannedInstance:
    (inst,) = unit(plan, name).instances
    return inst


def test_the_master_command_has_the_specs_defaults_and_binds_the_node(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + MASTER + "observability: {}\n")  # metrics on: the master is a scrape target
    inst = only(p, "mooncake-master")
    assert inst.node == "node0" and inst.node_ip == "127.0.0.1"
    assert inst.argv == [
        "mooncake_master",
        "--rpc_address=127.0.0.1",
        "--rpc_port=8700",
        "--enable_http_metadata_server=true",
        "--http_metadata_server_host=127.0.0.1",
        "--http_metadata_server_port=8701",
        "--metrics_host=127.0.0.1",
        "--metrics_port=8702",
        "--eviction_high_watermark_ratio=0.9",
        "--default_kv_lease_ttl=10000",
        "--rpc_thread_num=16",
        "--enable_metric_reporting=true",
    ]
    assert inst.ports == [8700, 8701, 8702]
    assert {(e["port"], e["step"]) for e in p.ports if e["node"] == "node0"} >= {
        (8700, "service_mooncake-master"),
        (8701, "service_mooncake-master"),
        (8702, "service_mooncake-master"),
    }
    assert inst.readiness is not None
    assert (inst.readiness.probe, inst.readiness.timeout) == ("http", 300.0)
    assert inst.readiness.config["url"] == "http://127.0.0.1:8702/health"
    assert inst.readiness.config["status"] == 200
    assert "command -v -- mooncake_master" in (inst.preamble or "")
    u = unit(p, "mooncake-master")
    assert (u.phase, u.critical) == ("before_workers", True)
    # it outlives its clients: stores, workers and their embedded clients stop first
    assert u.tier == LAST_TIER > unit(p, "prefill").tier
    assert [t.url for t in p.scrape_targets] == ["http://127.0.0.1:8702/metrics"]


def test_every_master_knob_and_args_reach_the_command(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + "  - name: mooncake-master\n    type: mooncake-master\n    args: [--client_ttl=30]\n"
        "    options: {rpc_port: 9700, metadata_port: null, metrics_port: 9702,"
        " eviction_high_watermark_ratio: 0.75, default_kv_lease_ttl: 5000, rpc_thread_num: 4,"
        " enable_metric_reporting: false, protocol: rdma, binary: /opt/mc/mooncake_master}\n"
    )
    inst = only(p, "mooncake-master")
    assert inst.argv == [
        "/opt/mc/mooncake_master",
        "--rpc_address=127.0.0.1",
        "--rpc_port=9700",
        "--enable_http_metadata_server=false",
        "--metrics_host=127.0.0.1",
        "--metrics_port=9702",
        "--eviction_high_watermark_ratio=0.75",
        "--default_kv_lease_ttl=5000",
        "--rpc_thread_num=4",
        "--enable_metric_reporting=false",
        "--client_ttl=30",
    ]
    assert inst.ports == [9700, 9702]
    # without an HTTP metadata server, transfer engines exchange metadata peer to peer
    assert {k: p.discovery_env[k] for k in MOONCAKE_KEYS} == {
        "MOONCAKE_MASTER": "127.0.0.1:9700",
        "MOONCAKE_TE_META_DATA_SERVER": "P2PHANDSHAKE",
        "MOONCAKE_PROTOCOL": "rdma",
    }


def test_workers_frontend_and_benchmark_are_told_where_the_master_is(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + MASTER, local=False)
    told = {
        "MOONCAKE_MASTER": "<node0-ip>:8700",
        "MOONCAKE_TE_META_DATA_SERVER": "http://<node0-ip>:8701/metadata",
        "MOONCAKE_PROTOCOL": "tcp",
    }
    for name in ("prefill", "decode", "frontend", "benchmark"):
        for inst in unit(p, name).instances:
            assert {k: inst.env.get(k) for k in MOONCAKE_KEYS} == told, inst.step
    # each worker's embedded client advertises its own node, not the master's
    for inst in [*unit(p, "prefill").instances, *unit(p, "decode").instances]:
        assert inst.env["MOONCAKE_LOCAL_HOSTNAME"] == inst.node_ip
        assert inst.env["MC_TCP_BIND_ADDRESS"] == inst.node_ip
        assert "MOONCAKE_GLOBAL_SEGMENT_SIZE" not in inst.env  # no stores: workers give DRAM
    assert only(p, "frontend").env.get("MOONCAKE_LOCAL_HOSTNAME") is None
    assert unit(p, "decode").instances[0].env["ROLE_ONLY"] == "1"


def test_nothing_mooncake_without_a_master(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + "  - {name: side, command: [sleep, '1']}\n")
    for u in p.units:
        for inst in u.instances:
            assert not [k for k in inst.env if k.startswith(("MOONCAKE_", "MC_"))], inst.step
    disabled = srt_plan(
        JOB + "  - {name: mooncake-master, type: mooncake-master, enabled: false}\n"
    )
    assert not [k for k in disabled.discovery_env if k.startswith("MOONCAKE_")]


def test_a_role_env_wins_over_what_the_master_tells_workers(srt_plan: MakePlan) -> None:
    text = JOB.replace(
        'decode: {workers: 2, command: [sleep, "1"], env: {ROLE_ONLY: "1"}}',
        'decode: {workers: 2, command: [sleep, "1"], env: {MOONCAKE_LOCAL_HOSTNAME: "ib-{node}",'
        " MOONCAKE_PROTOCOL: rdma}}",
    )
    p = srt_plan(text + MASTER)
    for inst in unit(p, "decode").instances:
        assert inst.env["MOONCAKE_LOCAL_HOSTNAME"] == f"ib-{inst.node}"
        assert inst.env["MOONCAKE_PROTOCOL"] == "rdma"
    assert only(p, "prefill").env["MOONCAKE_PROTOCOL"] == "tcp"


def test_an_external_master_is_honoured_everywhere(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + "  - {name: mooncake-master, type: mooncake-master, external: 'mc.example:50051',"
        " options: {metadata_port: 8080, protocol: rdma}}\n"
        "  - {name: store, type: mooncake-store, options: {global_segment_size: 1gb}}\n"
    )
    master = unit(p, "mooncake-master")
    assert master.external == "mc.example:50051" and master.instances == []
    told = {
        "MOONCAKE_MASTER": "mc.example:50051",
        "MOONCAKE_TE_META_DATA_SERVER": "http://mc.example:8080/metadata",
        "MOONCAKE_PROTOCOL": "rdma",
    }
    for name in ("prefill", "decode", "frontend", "benchmark", "store"):
        for inst in unit(p, name).instances:
            assert {k: inst.env.get(k) for k in MOONCAKE_KEYS} == told, inst.step
    # the store's own config file points at it too (the original used the infra node there)
    for inst in unit(p, "store").instances:
        config = json.loads(inst.files["mooncake-store.json"])
        assert config["master_server_address"] == "mc.example:50051"
        assert config["metadata_server"] == "http://mc.example:8080/metadata"
        assert config["protocol"] == "rdma"
    assert not [e for e in p.ports if e["step"] == "service_mooncake-master"]


SIDECAR = (
    "  - {name: probe, command: [sh, -c, 'echo {infra_ip}:{master_port} {metadata_port}'],"
    " start: after_frontend}\n"
)


def test_master_placeholders_follow_moved_ports(srt_plan: MakePlan) -> None:
    moved = (
        "  - {name: mooncake-master, type: mooncake-master,"
        " options: {rpc_port: 9700, metadata_port: 9701}}\n"
    )
    p = srt_plan(JOB + moved + SIDECAR)
    assert only(p, "probe").argv == ["sh", "-c", "echo 127.0.0.1:9700 9701"]
    assert only(p, "prefill").env["MOONCAKE_MASTER"] == "127.0.0.1:9700"


def test_master_placeholders_keep_the_specs_defaults(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + MASTER + SIDECAR)
    assert only(p, "probe").argv == ["sh", "-c", "echo 127.0.0.1:8700 8701"]


def test_an_external_masters_port_is_master_port(srt_plan: MakePlan) -> None:
    external = (
        "  - {name: mooncake-master, type: mooncake-master, external: 'mc.example:50051',"
        " options: {metadata_port: 8080}}\n"
    )
    p = srt_plan(JOB + external + SIDECAR)
    assert only(p, "probe").argv == ["sh", "-c", "echo 127.0.0.1:50051 8080"]


def test_a_store_per_node_with_its_config_file_and_probe(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB
        + MASTER
        + "  - {name: store, type: mooncake-store, options: {global_segment_size: 256MB,"
        " local_buffer_size: 64mb}}\n"
    )
    u = unit(p, "store")
    assert (u.phase, u.critical, u.placement) == ("before_workers", True, "workers")
    assert [i.node for i in u.instances] == ["node0", "node1", "node2"]  # one per worker node
    for inst in u.instances:
        path = f"/jobs/j/work/{inst.step}/mooncake-store.json"
        assert inst.argv == ["mc_store_rest_server", "--config", path, "--port", "8800"]
        assert json.loads(inst.files["mooncake-store.json"]) == {
            "local_hostname": inst.node_ip,
            "metadata_server": "http://127.0.0.1:8701/metadata",
            "master_server_address": "127.0.0.1:8700",
            "protocol": "tcp",
            "device_name": "",
            "global_segment_size": 256 * 1024**2,
            "local_buffer_size": 64 * 1024**2,
        }
        assert inst.env["MOONCAKE_CONFIG_PATH"] == path
        assert inst.env["MOONCAKE_LOCAL_HOSTNAME"] == inst.node_ip
        assert inst.env["MC_TCP_BIND_ADDRESS"] == inst.node_ip
        assert inst.readiness is not None
        assert (inst.readiness.probe, inst.readiness.config["port"]) == ("tcp", 8800)
        assert inst.ports == [8800]
    # the stores own the worker nodes' segments: the embedded clients give none
    for role in ("prefill", "decode"):
        for inst in unit(p, role).instances:
            assert inst.env["MOONCAKE_GLOBAL_SEGMENT_SIZE"] == "0", inst.step


def test_a_store_on_one_role_zeroes_only_that_roles_segments(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + MASTER + "  - {name: s, type: mooncake-store, placement: {node: decode}}\n")
    assert [i.node for i in unit(p, "s").instances] == ["node1", "node2"]
    assert "MOONCAKE_GLOBAL_SEGMENT_SIZE" not in only(p, "prefill").env
    assert {i.env["MOONCAKE_GLOBAL_SEGMENT_SIZE"] for i in unit(p, "decode").instances} == {"0"}
    head = srt_plan(JOB + MASTER + "  - {name: s, type: mooncake-store, placement: {node: head}}\n")
    assert "MOONCAKE_GLOBAL_SEGMENT_SIZE" not in only(head, "prefill").env


SPEC_EXAMPLE = """\
schema: 2
name: standalone-stores
engine: {type: sglang}
resources: {gpus_per_node: 8}
frontend: {type: sglang, command: [python3, -m, sglang_router.launch_router]}
roles:
  prefill:
    command: [python3, -m, sglang.launch_server]
    env:
      MOONCAKE_PROTOCOL: rdma
      MOONCAKE_DEVICE: "mlx5_0,mlx5_1"
      MOONCAKE_GLOBAL_SEGMENT_SIZE: "0"
    args: [--disaggregation-transfer-backend, mooncake]
  decode:
    command: [python3, -m, sglang.launch_server]
    env:
      MOONCAKE_PROTOCOL: rdma
      MOONCAKE_DEVICE: "mlx5_0,mlx5_1"
      MOONCAKE_GLOBAL_SEGMENT_SIZE: "0"
    args: [--disaggregation-transfer-backend, mooncake]
services:
  - name: mooncake-master
    type: mooncake-master
    container: mooncake
  - name: store-prefill
    type: mooncake-store
    placement:
      node: prefill
    args: ["--port", "8800"]
    env:
      MOONCAKE_PROTOCOL: rdma
      MOONCAKE_DEVICE: "mlx5_0,mlx5_1"
      MOONCAKE_GLOBAL_SEGMENT_SIZE: 100gb
    preamble: |
      ulimit -n 1048576
      ulimit -l unlimited
    cpus_per_task: 8
    readiness:
      port: 8800
  - name: store-decode
    type: mooncake-store
    placement:
      node: decode
    args: ["--port", "8800"]
    env:
      MOONCAKE_PROTOCOL: rdma
      MOONCAKE_DEVICE: "mlx5_0,mlx5_1"
      MOONCAKE_GLOBAL_SEGMENT_SIZE: 400gb
    preamble: |
      ulimit -n 1048576
      ulimit -l unlimited
    cpus_per_task: 8
    readiness:
      port: 8800
"""


def test_the_specs_two_store_example_plans(srt_plan: MakePlan) -> None:
    p = srt_plan(SPEC_EXAMPLE, local=False)
    assert p.phases["before_workers"] == ["mooncake-master", "store-prefill", "store-decode"]
    for name, node, size in (
        ("store-prefill", "node0", "100gb"),
        ("store-decode", "node1", "400gb"),
    ):
        inst = only(p, name)
        assert inst.node == node
        assert unit(p, name).container == "mooncake"  # the master's
        # the recipe's --port is the one argparse keeps, so srt adds none of its own
        assert inst.argv == [
            "mc_store_rest_server", "--config", f"/jobs/j/work/{inst.step}/mooncake-store.json",
            "--port", "8800",
        ]  # fmt: skip
        assert inst.ports == [8800]
        assert inst.cpus_per_task == 8
        assert "ulimit -l unlimited" in (inst.preamble or "")
        config = json.loads(next(iter(inst.files.values())))
        assert config["global_segment_size"] == size  # as written; Mooncake reads "100gb"
        assert (config["protocol"], config["device_name"]) == ("rdma", "mlx5_0,mlx5_1")
        assert config["master_server_address"] == "<node0-ip>:8700"
        assert inst.env["MOONCAKE_MASTER"] == "<node0-ip>:8700"
        assert inst.env["MOONCAKE_LOCAL_HOSTNAME"] == inst.node_ip
    for role in ("prefill", "decode"):
        env = only(p, role).env
        assert (env["MOONCAKE_PROTOCOL"], env["MOONCAKE_GLOBAL_SEGMENT_SIZE"]) == ("rdma", "0")


def test_two_stores_on_one_node_with_one_port_are_refused_at_plan_time(srt_plan: MakePlan) -> None:
    text = (
        JOB
        + MASTER
        + "  - {name: a, type: mooncake-store, placement: {node: prefill}}\n"
        + "  - {name: b, type: mooncake-store}\n"  # every worker node: prefill's too
    )
    with pytest.raises(RecipeError) as info:
        srt_plan(text)
    (problem,) = info.value.errors
    assert problem.render("recipe.yaml") == (
        "recipe.yaml:12:5: services[b]: services[a] and services[b] both listen on port 8800 on"
        " node node0; give them disjoint placements or ports"
    )
    srt_plan(
        text.replace(
            "{name: b, type: mooncake-store}",
            "{name: b, type: mooncake-store, options: {port: 8801}}",
        )
    )


def test_a_store_port_written_in_args_is_the_probed_and_claimed_one(srt_plan: MakePlan) -> None:
    p = srt_plan(JOB + MASTER + "  - {name: s, type: mooncake-store, args: ['--port=8899']}\n")
    for inst in unit(p, "s").instances:
        assert inst.argv[-1] == "--port=8899" and inst.argv.count("--port") == 0
        assert inst.ports == [8899]
        assert inst.readiness is not None and inst.readiness.config["port"] == 8899


def test_a_recipe_command_still_reads_the_config_file(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + MASTER + "  - {name: s, type: mooncake-store, placement: {node: prefill},"
        " command: [python3, -m, mooncake.mooncake_store_service], args: [--port, '8810']}\n"
    )
    inst = only(p, "s")
    assert inst.argv == ["python3", "-m", "mooncake.mooncake_store_service", "--port", "8810"]
    assert inst.env["MOONCAKE_CONFIG_PATH"] == f"{inst.work_dir}/mooncake-store.json"
    assert inst.preamble is None  # not srt's binary to check
    assert inst.ports == [8810]


def test_store_config_is_written_where_every_worker_reads_it(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB + "  - name: mooncake-master\n    type: mooncake-master\n"
        "    options:\n      protocol: rdma\n      store_config:\n"
        "        global_segment_size: 4GB\n        device_name: '{node}-mlx5_0'\n"
        "        master_server_address: 'ignored:1'\n"
    )
    master = only(p, "mooncake-master")
    path = f"{master.work_dir}/mooncake_store_config.json"
    assert json.loads(master.files["mooncake_store_config.json"]) == {
        "global_segment_size": 4 * 1024**3,
        "device_name": "{node}-mlx5_0",  # one file for all workers: not rendered for the master
        "master_server_address": "127.0.0.1:8700",
        "metadata_server": "http://127.0.0.1:8701/metadata",
        "protocol": "rdma",
    }
    for role in ("prefill", "decode"):
        for inst in unit(p, role).instances:
            assert inst.env["MOONCAKE_CONFIG_PATH"] == path
    assert "MOONCAKE_CONFIG_PATH" not in only(p, "frontend").env


def test_a_dedicated_master_gets_a_node_of_its_own(srt_plan: MakePlan) -> None:
    p = srt_plan(
        JOB
        + "  - {name: mooncake-master, type: mooncake-master, placement: {node: dedicated}}\n"
        + "  - {name: store, type: mooncake-store}\n"
    )
    master = only(p, "mooncake-master")
    assert master.node == "node0" and p.infra == "node0"
    worker_nodes = {i.node for r in ("prefill", "decode") for i in unit(p, r).instances}
    assert master.node not in worker_nodes
    assert {i.node for i in unit(p, "store").instances} == worker_nodes
    assert only(p, "prefill").env["MOONCAKE_MASTER"] == f"{master.node_ip}:8700"


def test_binary_lookup_order(srt_plan: MakePlan, tmp_path: Path) -> None:
    """options.binary, else the site's [binaries] entry, else the name (PATH, then the venv)."""
    text = JOB + MASTER + "  - {name: s, type: mooncake-store, placement: {node: prefill}}\n"
    p = srt_plan(text)
    assert (only(p, "mooncake-master").argv[0], only(p, "s").argv[0]) == (
        "mooncake_master",
        "mc_store_rest_server",
    )
    site = tmp_path / "site.toml"
    site.write_text(
        '[binaries]\nmooncake_master = "/site/mc/mooncake_master"\n'
        'mc_store_rest_server = "/site/mc/mc_store_rest_server"\n'
    )
    site_cfg = kit.site_config(site)
    p = srt_plan(text, site=site_cfg)
    master, store = only(p, "mooncake-master"), only(p, "s")
    assert (master.argv[0], store.argv[0]) == (
        "/site/mc/mooncake_master",
        "/site/mc/mc_store_rest_server",
    )
    assert "command -v -- /site/mc/mooncake_master " in (master.preamble or "")
    own = srt_plan(
        text.replace("type: mooncake-store,", "type: mooncake-store, options: {binary: /mine/mc},"),
        site=site_cfg,
    )
    assert only(own, "s").argv[0] == "/mine/mc"


def test_a_missing_binary_explains_how_to_install(tmp_path: Path) -> None:
    """The preamble srt plans, run with an empty PATH: what a user reads in the log."""
    import subprocess

    from srt_mooncake.master import INSTALL_HINT
    from srt_services.extend import missing_binary_check

    script = missing_binary_check("mooncake_master_not_here", "mooncake-master", INSTALL_HINT)
    done = subprocess.run(
        ["/bin/bash", "-c", script],
        env={"PATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 127
    assert "pip install 'srt-mooncake[server]', which needs Debian's libibverbs1" in done.stderr
    assert "[binaries] mooncake_master in the site config" in done.stderr


STORES_ON_TWO_NODES = (
    JOB
    + MASTER
    + "  - {name: store-a, type: mooncake-store, placement: {node: prefill}}\n"
    + "  - {name: store-b, type: mooncake-store, placement: {node: decode}}\n"
)


def test_wildcard_binds_across_local_virtual_nodes_are_refused_for_a_local_run(
    srt_plan: MakePlan,
) -> None:
    """The stores' REST servers bind 0.0.0.0:8800 whatever they are told: two virtual
    nodes of one machine cannot both have it. `srt run` refuses the plan naming both
    services; dry-run --local warns; a cluster plan (separate machines) is fine."""
    with pytest.raises(RecipeError) as info:
        srt_plan(STORES_ON_TWO_NODES, runs_here=True)
    text = str(info.value)
    assert "services[store-a]" in text and "binds 0.0.0.0:8800 on node0" in text
    assert "services[store-b] on node1" in text and "local virtual nodes share one network" in text
    warned = srt_plan(STORES_ON_TWO_NODES, local=True).warnings
    assert any("services[store-a]: binds 0.0.0.0:8800" in w for w in warned)
    assert not [w for w in srt_plan(STORES_ON_TWO_NODES, local=False).warnings if "0.0.0.0" in w]
    # the decode store alone still spans two virtual nodes (two decode workers' nodes)
    moved = STORES_ON_TWO_NODES.replace(
        "placement: {node: decode}}", "placement: {node: decode}, options: {port: 8810}}"
    )
    with pytest.raises(RecipeError) as again:
        srt_plan(moved, runs_here=True)
    assert "binds 0.0.0.0:8810 on node1, node2" in str(again.value)
    # two stores on one virtual node with their own ports: nothing collides
    one_node = STORES_ON_TWO_NODES.replace(
        "placement: {node: decode}}", "placement: {node: prefill}, options: {port: 8810}}"
    )
    plan = srt_plan(one_node, runs_here=True)
    assert only(plan, "store-a").node == only(plan, "store-b").node == "node0"
