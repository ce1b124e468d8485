"""``examples/ray-pool.yaml`` (the spec's RL pool) validates and plans with srt-ray."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from srt_services.extend import Plan

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "ray-pool.yaml"


def test_the_rl_pool_example_plans_a_gated_cluster(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(EXAMPLE.read_text())
    train = plan.unit("train")
    assert [i.argv[2] for i in train.instances] == ["--head", "--block"]
    assert train.fleet is not None and len(train.fleet.config["members"]) == 2
    assert plan.phases["before_workers"] == ["train"]
    assert plan.unit("envsrv").nodes == train.nodes
    (bench,) = plan.unit("benchmark").instances
    assert bench.argv[:3] == ["ray", "job", "submit"]
    assert bench.env["RAY_API_SERVER_ADDRESS"] == f"http://{train.instances[0].node_ip}:8265"
    assert [t.name for t in plan.scrape_targets] == [
        f"miles_{train.nodes[0]}",
        f"engines_{train.nodes[0]}",
    ]
