"""``metrics/targets.json``: what srt writes for Prometheus's file_sd, as instances come and go."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from srt_services.supervise.scrape_targets import ScrapeTargets

RECIPE = """
schema: 2
name: sd
frontend: {type: sglang, command: [f], port: 8000, metrics: {port: 8000}}
roles: {agg: {workers: 2, command: [w], port: 7000, metrics: {port: 7000, path: /m}}}
services:
  - {name: side, command: [a], placement: {node: all}, metrics: {port: 9000}}
"""


def read(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def test_lists_exactly_the_running_instances_with_their_labels(srt_plan, tmp_path: Path) -> None:
    planned = srt_plan(textwrap.dedent(RECIPE), nodes=2)
    writes: list[str] = []

    def guarded(what: str, write) -> bool:
        writes.append(what)
        write()
        return True

    sd = ScrapeTargets(planned, str(tmp_path), guarded)
    assert sd.enabled
    sd.open()
    path = tmp_path / "metrics" / "targets.json"
    assert read(path) == []
    sd.started("agg_1")
    sd.started("frontend")
    sd.started("not-a-target-step")
    groups = read(path)
    # plan order, not start order
    assert [g["labels"]["step"] for g in groups] == ["agg_1", "frontend"]
    agg = groups[0]
    assert agg["targets"] == [f"{planned.nodes[1].ip}:7000"]
    assert agg["labels"] == {
        "job": "sd",
        "job_id": planned.job_id,
        "service": "agg",
        "role": "agg",
        "node": planned.nodes[1].name,
        "instance": f"agg_1_{planned.nodes[1].name}",
        "step": "agg_1",
        "__metrics_path__": "/m",
    }
    sd.stopped("agg_1")
    sd.stopped("agg_1")  # twice: one change
    assert [g["labels"]["step"] for g in read(path)] == ["frontend"]
    assert writes == ["metrics/targets.json"] * 4
    assert not list((tmp_path / "metrics").glob("*.tmp*")), "written by rename"


def test_nothing_without_targets(srt_plan, tmp_path: Path) -> None:
    planned = srt_plan(
        textwrap.dedent(RECIPE.replace("name: sd", "name: sd\nobservability: {metrics: false}"))
    )
    sd = ScrapeTargets(planned, str(tmp_path), lambda what, write: write() or True)
    assert not sd.enabled
    sd.open()
    sd.started("frontend")
    assert not (tmp_path / "metrics").exists()
