"""What observability.metrics implies, and what each kind plans (no processes)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from srt_exporters.kind import group_config
from srt_services.extend import LAST_TIER, Plan
from srt_services.testing import RecipeError

JOB = """
schema: 2
name: m
resources: {gpus_per_node: 1}
frontend: {type: sglang, command: [f]}
roles: {agg: {workers: 2, command: [w]}}
"""


def units(p: Plan) -> dict[str, Any]:
    return {u.name: u for u in p.units}


def test_metrics_on_implies_the_exporters_and_prometheus(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(JOB)
    u = units(p)
    for name in ("node-exporter", "dcgm-exporter", "process-exporter", "prometheus"):
        assert u[name].implied_by == "observability.metrics", name
        assert u[name].options["if_missing"] == "skip"
        assert not u[name].critical
    assert [i.node for i in u["node-exporter"].instances] == ["node0", "node1"]
    assert u["dcgm-exporter"].restart is None, "no GPU does not go away by retrying"
    assert u["process-exporter"].placement == "all"
    prom = u["prometheus"]
    assert prom.phase == "infra" and p.phases["infra"] == ["prometheus"]
    assert prom.tier == LAST_TIER
    assert p.phases["after_frontend"] == ["node-exporter", "dcgm-exporter", "process-exporter"]
    names = {t.name for t in p.scrape_targets}
    assert {
        "node_exporter_node0",
        "dcgm_node1",
        "process_exporter_node1",
        "prometheus_node0",
    } <= names


def test_a_job_without_compute_nodes_gets_no_node_or_gpu_exporter(
    srt_plan: Callable[..., Plan],
) -> None:
    p = srt_plan("schema: 2\nname: s\nservices: [{name: a, command: [x]}]\n")
    assert set(units(p)) == {"a", "process-exporter", "prometheus"}
    assert not p.warnings


def test_metrics_off_implies_nothing_and_plans_no_targets(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(JOB + "observability: {metrics: false}\n")
    assert set(units(p)) == {"agg", "frontend"}
    assert p.scrape_targets == []


def test_a_declared_entry_replaces_or_drops_the_implied_one(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(
        JOB
        + """
services:
  - {name: node-exporter, enabled: false}
  - {name: prometheus, type: prometheus, options: {port: 9999, scrape_interval_seconds: 5}}
  - {name: gpus, type: dcgm-exporter, options: {port: 9411}}
"""
    )
    u = units(p)
    assert "node-exporter" not in u
    assert u["prometheus"].implied_by is None and u["prometheus"].replaces_implied
    assert "dcgm-exporter" not in u, "a declared dcgm-exporter under another name replaces it"
    assert [i.node for i in u["gpus"].instances] == ["node0", "node1"]


def test_prometheus_reads_the_file_srt_keeps_and_writes_into_the_job(
    srt_plan: Callable[..., Plan],
) -> None:
    p = srt_plan(JOB + "services: [{name: prometheus, type: prometheus, options: {port: 9999}}]\n")
    inst = units(p)["prometheus"].instances[0]
    assert "--storage.tsdb.path=/jobs/j/metrics/tsdb" in inst.argv
    assert f"--web.listen-address={inst.node_ip}:9999" in inst.argv
    config = json.loads(inst.files["prometheus.yml"])
    sd = config["scrape_configs"][0]["file_sd_configs"][0]
    assert sd["files"] == ["/jobs/j/metrics/targets.json"]
    assert config["global"]["scrape_interval"] == "15s"
    assert inst.readiness is not None and "/-/ready" in inst.readiness.describe


def test_the_benchmark_is_told_where_prometheus_answers(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(JOB + "benchmark: {type: command, command: [b]}\n")
    prom = units(p)["prometheus"]
    assert prom.instances[0].ports == [9099], "not 9090, which recipes give their own metrics"
    (bench,) = units(p)["benchmark"].instances
    assert bench.env["SRT_SERVICE_PROMETHEUS_URL"] == f"http://{prom.instances[0].node_ip}:9099"


def test_exporter_command_lines(srt_plan: Callable[..., Plan]) -> None:
    u = units(srt_plan(JOB))
    node = u["node-exporter"].instances[1]
    assert node.argv == [
        "prometheus-node-exporter",
        f"--web.listen-address={node.node_ip}:9101",
        "--collector.disable-defaults",
        "--collector.cpu",
        "--collector.infiniband",
        "--collector.meminfo",
    ]
    proc = u["process-exporter"].instances[0]
    assert proc.argv[:3] == [
        "prometheus-process-exporter",
        "-config.path",
        "/jobs/j/logs/process-exporter.yml",  # the spec's <log_dir>/process-exporter.yml
    ]
    assert list(proc.files) == ["/jobs/j/logs/process-exporter.yml"]
    assert "-web.listen-address" in proc.argv
    dcgm = u["dcgm-exporter"].instances[0]
    assert dcgm.argv == [
        "dcgm-exporter",
        "--collect-interval=1000",
        "--address",
        f"{dcgm.node_ip}:9401",
    ]


def test_a_container_gets_no_shell_preamble(srt_plan: Callable[..., Plan]) -> None:
    u = units(
        srt_plan(
            JOB
            + "services: [{name: node-exporter, type: node-exporter, container: quay.io/prometheus/node-exporter}]\n"
        )
    )
    assert all(i.preamble is None for i in u["node-exporter"].instances)
    assert all(i.preamble for i in u["process-exporter"].instances)


def test_process_groups_keep_regex_braces() -> None:
    from srt_exporters.kind import ProcessGroup

    text = group_config([ProcessGroup(name="mine", cmdline=["x{2,}"])])
    assert text.index('"mine"') < text.index('"frontend"'), "the recipe's groups match first"
    assert "x\\x7B2,\\x7D" in text


def test_placeholder_braces_in_groups_survive_planning(srt_plan: Callable[..., Plan]) -> None:
    p = srt_plan(
        JOB
        + 'services: [{name: process-exporter, type: process-exporter, options: {groups: [{name: g, cmdline: ["{node}"]}]}}]\n'
    )
    text = units(p)["process-exporter"].instances[0].files["/jobs/j/logs/process-exporter.yml"]
    assert "\\x7Bnode\\x7D" in text


def test_implied_services_are_never_dropped_at_plan_time(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, srt_plan: Callable[..., Plan]
) -> None:
    """Whether a binary is there is decided on the node that runs the instance, at launch
    (under Slurm the planning host is the batch host, not where GPUs are): with nothing
    installed where the job is planned, every implied exporter is still planned, with a
    look-up that marks its instance unavailable on a node that lacks it."""
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing is installed here
    plan = srt_plan(
        JOB + "services: [{name: prometheus, type: prometheus, options: {if_missing: fail}}]\n",
        runs_here=True,
    )
    left = {u.name: u for u in plan.units}
    assert {"node-exporter", "dcgm-exporter", "process-exporter", "prometheus"} <= set(left)
    assert not [w for w in plan.warnings if "skipped" in w]
    assert [t for t in plan.scrape_targets if t.service == "node-exporter"]
    for name in ("node-exporter", "dcgm-exporter", "process-exporter"):
        inst = left[name].instances[0]
        assert inst.preamble is not None
        assert f"{inst.work_dir}/srt-unavailable" in inst.preamble, name
    # declared with if_missing: fail, a missing binary fails the instance instead
    prometheus = left["prometheus"].instances[0]
    assert prometheus.preamble is not None and "srt-unavailable" not in prometheus.preamble


def test_bad_options_are_refused_with_their_line(srt_plugins: Any, srt_load: Any) -> None:
    with pytest.raises(RecipeError) as exc:
        srt_load(
            JOB
            + "services: [{name: prometheus, type: prometheus, options: {retention: forever, scrape_interval_seconds: 0.1}}]\n"
        )
    text = str(exc.value)
    assert "services[prometheus].options.retention" in text
    assert "services[prometheus].options.scrape_interval_seconds" in text
    # the services line: the 6th, since the kit drops JOB's leading newline
    assert "recipe.yaml:6:" in text


def test_the_specs_collect_interval_for_node_exporter_is_accepted_with_a_warning(
    srt_load: Any,
) -> None:
    loaded = srt_load(
        JOB + "services: [{name: node-exporter, options: {collect_interval_ms: 500}}]\n"
    )
    (w,) = loaded.warnings
    assert w.label == "services[node-exporter].options.collect_interval_ms"
    assert w.line == 6  # the services line (the kit drops JOB's leading newline)
    assert "changes nothing" in w.message and "scrape_interval_seconds" in w.message


def test_the_job_container_is_not_inherited_by_the_host_exporters(
    srt_plan: Callable[..., Plan],
) -> None:
    """They run host binaries (host_native); only an entry's own container applies."""
    p = srt_plan(
        JOB
        + "container: job-image\n"
        + "services:\n  - {name: node-exporter, container: quay.io/prometheus/node-exporter}\n"
    )
    u = units(p)
    for name in ("dcgm-exporter", "process-exporter", "prometheus"):
        assert u[name].container is None, name
    assert u["node-exporter"].container == "quay.io/prometheus/node-exporter"
    assert u["agg"].container == "job-image"


def test_unpinned_default_ports_are_free_ones_when_the_job_runs_here(
    srt_plan: Callable[..., Plan],
) -> None:
    """Two local jobs on one machine must not both take 9099 (and 9101, 9256...): on this
    machine a default port the recipe did not write is one the kernel says is free; a
    written port stays, and dry-run shows the defaults."""
    text = JOB + "services: [{name: prometheus, type: prometheus}]\n"
    first, second = srt_plan(text, runs_here=True), srt_plan(text, runs_here=True)
    dry = srt_plan(text)
    for name, default in (("prometheus", 9099), ("node-exporter", 9101)):
        ports = [units(p)[name].instances[0].ports for p in (first, second, dry)]
        assert ports[2] == [default]
        assert default not in ports[0] + ports[1], name
    targets = {t.service: t for t in first.scrape_targets}
    assert targets["prometheus"].url.endswith(
        f":{units(first)['prometheus'].instances[0].ports[0]}/metrics"
    )
    pinned = JOB + "services: [{name: prometheus, type: prometheus, options: {port: 9099}}]\n"
    assert units(srt_plan(pinned, runs_here=True))["prometheus"].instances[0].ports == [9099]
