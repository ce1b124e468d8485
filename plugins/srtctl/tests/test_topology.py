"""Placement and port rules (doc §4, §7) on small inline configs."""

from __future__ import annotations

from typing import Any

import pytest
from srt_srtctl.deviations import Fidelity
from srt_srtctl.loader import load_config_dict
from srt_srtctl.plan import build_job
from srt_srtctl.topology import TopologyError, build_topology, total_node_count
from srt_srtctl.values import RuntimeValues, placeholder_nodes


def _cfg(resources: dict[str, Any], **extra: Any) -> Any:
    data: dict[str, Any] = {
        "name": "t",
        "model": {"path": "m", "container": "c", "precision": "fp8"},
        "resources": {"gpu_type": "b200", **resources},
    }
    data.update(extra)
    return load_config_dict(data)


def test_wide_worker_takes_whole_nodes() -> None:
    cfg = _cfg(
        {
            "gpus_per_node": 8,
            "prefill_nodes": 2,
            "decode_nodes": 0,
            "prefill_workers": 1,
            "gpus_per_prefill": 12,
        }
    )
    topo = build_topology(cfg, placeholder_nodes(2))
    assert topo.endpoints[0].nodes == ["node0", "node1"]
    assert topo.endpoints[0].gpu_indices == list(range(8))


def test_decode_starts_on_fresh_node() -> None:
    cfg = _cfg(
        {
            "gpus_per_node": 8,
            "prefill_nodes": 1,
            "decode_nodes": 1,
            "prefill_workers": 1,
            "decode_workers": 2,
            "gpus_per_prefill": 4,
            "gpus_per_decode": 4,
        }
    )
    topo = build_topology(cfg, placeholder_nodes(2))
    assert [(e.role, e.nodes, e.gpu_indices) for e in topo.endpoints] == [
        ("prefill", ["node0"], [0, 1, 2, 3]),
        ("decode", ["node1"], [0, 1, 2, 3]),
        ("decode", ["node1"], [4, 5, 6, 7]),
    ]
    http = [(p.node, p.http_port) for p in topo.processes]
    assert http == [("node0", 6100), ("node1", 6100), ("node1", 6132)]


def test_spread_workers() -> None:
    cfg = _cfg(
        {
            "gpus_per_node": 8,
            "agg_nodes": 2,
            "agg_workers": 2,
            "gpus_per_agg": 2,
            "spread_workers": True,
        }
    )
    topo = build_topology(cfg, placeholder_nodes(2))
    assert [e.nodes for e in topo.endpoints] == [["node0"], ["node1"]]


def test_not_enough_nodes() -> None:
    cfg = _cfg({"gpus_per_node": 4, "agg_nodes": 1, "agg_workers": 2, "gpus_per_agg": 4})
    with pytest.raises(TopologyError, match="Not enough nodes"):
        build_topology(cfg, placeholder_nodes(1))


def test_dedicated_infra_node() -> None:
    cfg = _cfg({"agg_nodes": 1}, infra={"etcd_nats_dedicated_node": True})
    assert total_node_count(cfg) == 2
    topo = build_topology(cfg, placeholder_nodes(2))
    assert (topo.roles.infra, topo.roles.head, topo.roles.bench, topo.roles.workers) == (
        "node0",
        "node1",
        "node1",
        ["node1"],
    )


def test_dedicated_client_takes_last_node() -> None:
    cfg = _cfg(
        {"agg_nodes": 2},
        benchmark={"client_dedicated_node": True, "colocate_with_frontend": False},
        infra={"etcd_nats_dedicated_node": True},
    )
    assert total_node_count(cfg) == 4
    roles = build_topology(cfg, placeholder_nodes(4)).roles
    assert (roles.infra, roles.bench, roles.workers) == ("node0", "node3", ["node1", "node2"])


def test_port_formulas() -> None:
    cfg = _cfg(
        {
            "gpus_per_node": 4,
            "prefill_nodes": 1,
            "decode_nodes": 2,
            "prefill_workers": 2,
            "decode_workers": 1,
        }
    )
    topo = build_topology(cfg, placeholder_nodes(3))
    p0, p1, d0, d1 = topo.processes
    assert (p0.sys_port, p1.sys_port, d0.sys_port, d1.sys_port) == (7500, 7501, 7502, 7503)
    assert (p0.bootstrap_port, p1.bootstrap_port) == (7200, 7201)
    assert (d0.http_port, d1.http_port, d1.node_rank) == (6100, 0, 1)
    assert (d1.kv_events_port, d1.nixl_port, d1.nccl_port, d1.vllm_port) == (
        5203,
        5403,
        17503,
        20150,
    )


def test_frontends_behind_nginx() -> None:
    cfg = _cfg({"agg_nodes": 4, "agg_workers": 4}, frontend={"num_additional_frontends": 1})
    fe = build_topology(cfg, placeholder_nodes(4)).frontend
    assert (fe.nginx_node, fe.frontend_nodes, fe.frontend_port) == (
        "node0",
        ["node1", "node2"],
        8180,
    )


def test_values_replace_placeholders() -> None:
    cfg = _cfg(
        {"agg_nodes": 1},
        benchmark={"type": "sa-bench", "isl": 1, "osl": 1, "concurrencies": [1, 2]},
    )
    plan = build_job(
        cfg,
        nodes=["gpu7"],
        values=RuntimeValues(log_dir="/out/logs", node_ips={"gpu7": "10.0.0.7"}),
    )
    worker = next(p for p in plan.processes if p.worker)
    assert worker.env["HEAD_NODE_IP"] == "10.0.0.7"
    assert "/out/logs/gpu7_config.json" in worker.argv
    bench = next(p for p in plan.processes if p.stage == "benchmark")
    assert bench.argv[5] == "1x2"


def test_deviation_switches() -> None:
    cfg = _cfg(
        {"agg_nodes": 1},
        backend={"sglang_config": {"aggregated": {"disaggregation-mode": "null", "tp": 4}}},
    )
    plan = build_job(cfg, fidelity=Fidelity.all_fixed())
    worker = next(p for p in plan.processes if p.worker)
    assert "/logs/node0_config.json" in worker.argv
    infra = plan.processes[0]
    assert infra.argv[-1] == "/logs"
    with pytest.raises(ValueError, match="unknown deviation"):
        Fidelity(fixes=frozenset({"nope"}))


def test_unknown_benchmark_is_runtime_error_by_default() -> None:
    cfg = _cfg({"agg_nodes": 1}, benchmark={"type": "gsm8k-bench"})
    plan = build_job(cfg)
    assert plan.errors == ["Unknown benchmark type: gsm8k-bench"]
    with pytest.raises(ValueError, match="gsm8k-bench"):
        build_job(cfg, fidelity=Fidelity(fixes=frozenset({"unknown-benchmark-at-runtime"})))
