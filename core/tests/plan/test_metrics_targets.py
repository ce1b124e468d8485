"""Scrape targets: ``metrics.path`` placeholders checked and rendered per scraped node, and
``observability.metrics: false`` means no target at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from srt_services.contracts.plan import Plan

POOL = """
schema: 2
name: met
frontend: {type: none}
observability: %s  # {}: metrics on by default (srt-exporters need not be installed)
services:
  - name: train
    command: [x]
    nodes: 2
    metrics: {port: 9090, path: "/metrics/{node}/{job_name}"}
  - name: single
    command: [x]
    metrics: [{name: a, port: 9100}, {name: b, port: 9101, path: /stats}]
"""


def test_a_metrics_path_is_rendered_for_each_scraped_node(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(POOL % "{}")
    train = [t for t in p.scrape_targets if t.service == "train"]
    nodes = p.unit("train").nodes
    ips = {i.node: i.node_ip for i in p.unit("train").instances}
    assert [(t.name, t.url) for t in train] == [
        (f"train_{n}", f"http://{ips[n]}:9090/metrics/{n}/met") for n in nodes
    ]
    assert sorted(t.name.split("_")[0] for t in p.scrape_targets) == ["a", "b", "train", "train"]


def test_an_unknown_placeholder_in_a_metrics_path_is_refused_with_its_line(
    srt_problem: Callable[..., Any],
) -> None:
    p = srt_problem(POOL.replace("{job_name}", "{job_nme}") % "{}")
    assert p.label == "services[train].metrics.path"
    assert p.message.startswith("unknown placeholder {job_nme} (did you mean {job_name}?)")
    assert (p.line, p.column) == (9, 27)


def test_metrics_off_means_no_scrape_target_at_all(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(POOL % "{metrics: false}")
    assert p.scrape_targets == []
    assert p.unit("train").metrics, "the service still says what it serves (dry-run shows it)"
