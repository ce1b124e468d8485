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


NODE_IMAGE = "quay.io/prometheus/node-exporter:v1.8.2"
DCGM_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04"
PROMETHEUS_IMAGE = "quay.io/prometheus/prometheus:v2.53.2"


def test_in_a_container_job_the_exporters_run_the_specs_images_with_their_commands(
    srt_plan: Callable[..., Plan],
) -> None:
    """The job container has no exporter in it and the compute nodes rarely have the host
    packages: the spec runs the upstream images, each with the binary it has there (no
    shell, so no look-up preamble). process-exporter stays on the bare node (the spec's
    default), and the workers keep the job container."""
    u = units(srt_plan(JOB + "container: job-image\n"))
    node = u["node-exporter"]
    assert node.container == NODE_IMAGE
    inst = node.instances[1]
    assert inst.argv[0] == "/bin/node_exporter"
    assert inst.argv[1:] == [
        f"--web.listen-address={inst.node_ip}:9101",
        "--collector.disable-defaults",
        "--collector.cpu",
        "--collector.infiniband",
        "--collector.meminfo",
    ]
    assert inst.preamble is None and inst.container == NODE_IMAGE
    dcgm = u["dcgm-exporter"].instances[0]
    assert (dcgm.container, dcgm.argv[0], dcgm.preamble) == (DCGM_IMAGE, "dcgm-exporter", None)
    assert dcgm.argv[1:] == ["--collect-interval=1000", "--address", f"{dcgm.node_ip}:9401"]
    prom = u["prometheus"].instances[0]
    assert (prom.container, prom.argv[0], prom.preamble) == (
        PROMETHEUS_IMAGE,
        "/bin/prometheus",
        None,
    )
    proc = u["process-exporter"].instances[0]
    assert proc.container is None and proc.argv[0] == "prometheus-process-exporter"
    assert proc.preamble and "command -v" in proc.preamble
    assert u["agg"].container == "job-image"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("command: [w]}", "command: [w], container: eng}"),
        ("command: [f]}", "command: [f], container: fe}"),
        ("name: m\n", "name: m\nbenchmark: {type: command, command: [b], container: bench}\n"),
    ],
)
def test_a_container_on_a_worker_the_frontend_or_the_benchmark_is_a_container_job_too(
    srt_plan: Callable[..., Plan], old: str, new: str
) -> None:
    assert old in JOB
    assert units(srt_plan(JOB.replace(old, new)))["node-exporter"].container == NODE_IMAGE


def test_bare_host_binaries_stay_the_default_without_containers_and_on_this_machine(
    srt_plan: Callable[..., Plan],
) -> None:
    """Without images the host packages run, as before; and under `srt run` (the local
    launcher runs no image) a container job's exporters run their host binaries too."""
    bare = units(srt_plan(JOB))
    assert bare["node-exporter"].container is None
    assert bare["node-exporter"].instances[0].argv[0] == "prometheus-node-exporter"
    here = units(srt_plan(JOB + "container: job-image\n", runs_here=True))
    for name, binary in (
        ("node-exporter", "prometheus-node-exporter"),
        ("dcgm-exporter", "dcgm-exporter"),
        ("prometheus", "prometheus"),
    ):
        inst = here[name].instances[0]
        assert here[name].container is None and inst.container is None, name
        assert inst.argv[0] == binary, name
        assert inst.preamble and "srt-unavailable" in inst.preamble, name


def test_a_chosen_binary_or_command_keeps_the_bare_node(srt_plan: Callable[..., Plan]) -> None:
    u = units(
        srt_plan(
            JOB
            + "container: job-image\n"
            + "services:\n"
            + "  - {name: node-exporter, options: {binary: /opt/ne/node_exporter}}\n"
            + "  - {name: dcgm-exporter, command: [my-dcgm, --x]}\n"
        )
    )
    assert u["node-exporter"].container is None
    assert u["node-exporter"].instances[0].argv[0] == "/opt/ne/node_exporter"
    assert u["dcgm-exporter"].container is None
    assert u["dcgm-exporter"].instances[0].argv == ["my-dcgm", "--x"]


@pytest.mark.parametrize(
    ("kind", "image", "binary"),
    [
        ("node-exporter", "quay.io/prometheus/node-exporter", "/bin/node_exporter"),
        ("node-exporter", "registry.site:5000/mirror/node-exporter:v1.8.2", "/bin/node_exporter"),
        ("process-exporter", "ncabatoff/process-exporter:0.8.3", "/bin/process-exporter"),
        ("dcgm-exporter", "mirror/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", "dcgm-exporter"),
        ("prometheus", "quay.io/prometheus/prometheus@sha256:" + "0" * 64, "/bin/prometheus"),
    ],
)
def test_a_declared_upstream_image_gets_its_command(
    srt_plan: Callable[..., Plan], kind: str, image: str, binary: str
) -> None:
    """Recognised by the repository's name, whatever the registry, tag or digest (an
    air-gapped mirror, the spec's example), with or without a job container."""
    p = srt_plan(JOB + f"services: [{{name: {kind}, container: '{image}'}}]\n")
    inst = units(p)[kind].instances[0]
    assert inst.container == image
    assert inst.argv[0] == binary and inst.preamble is None


def test_an_image_srt_does_not_know_runs_the_host_binary(srt_plan: Callable[..., Plan]) -> None:
    """A site's own image with the Debian package in it: not judged, the usual name runs."""
    p = srt_plan(JOB + "services: [{name: node-exporter, container: site/tools:1}]\n")
    inst = units(p)["node-exporter"].instances[0]
    assert inst.container == "site/tools:1" and inst.argv[0] == "prometheus-node-exporter"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (
            "{name: node-exporter, container: quay.io/prometheus/node-exporter,"
            " options: {binary: prometheus-node-exporter}}",
            "services[node-exporter].options.binary",
        ),
        (
            "{name: ne, type: node-exporter, container: quay.io/prometheus/node-exporter,"
            " command: [prometheus-node-exporter, --web.listen-address=:9101]}",
            "services[ne].command[0]",
        ),
        (
            "{name: process-exporter, container: 'ncabatoff/process-exporter:0.8.3',"
            " command: [prometheus-process-exporter]}",
            "services[process-exporter].command[0]",
        ),
        (
            "{name: dcgm-exporter, container: 'nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9',"
            " options: {binary: /usr/local/bin/dcgm-exporter}}",
            "services[dcgm-exporter].options.binary",
        ),
    ],
)
def test_validate_refuses_a_command_the_image_does_not_have(
    srt_load: Any, entry: str, field: str
) -> None:
    with pytest.raises(RecipeError) as exc:
        srt_load(JOB + "services:\n  - " + entry + "\n")
    text = str(exc.value)
    assert field in text
    assert "is not in the image" in text and "would fail at every start" in text
    assert "recipe.yaml:7:" in text, text  # the entry's line (the kit drops JOB's newline)


def test_the_refusal_points_at_the_command_word(srt_load: Any) -> None:
    text = JOB + (
        "services:\n"
        "  - name: ne\n"
        "    type: node-exporter\n"
        "    container: quay.io/prometheus/node-exporter\n"
        "    command: [prometheus-node-exporter, --web.listen-address=:9101]\n"
    )
    with pytest.raises(RecipeError) as exc:
        srt_load(text)
    assert "recipe.yaml:10:15: services[ne].command[0]:" in str(exc.value)


def test_the_commands_the_images_have_are_accepted(srt_load: Any) -> None:
    srt_load(
        JOB
        + "services:\n"
        + "  - {name: node-exporter, container: quay.io/prometheus/node-exporter,"
        + " options: {binary: node_exporter}}\n"
        + "  - {name: pe, type: process-exporter, container: ncabatoff/process-exporter,"
        + " command: ['/bin/process-exporter', '-config.path', '{log_dir}/pe.yml']}\n"
    )


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


def test_dry_run_srun_lines_run_the_images_commands_without_a_shell(
    srt_plugins: Any, tmp_path: Any
) -> None:
    """What srt would hand srun: the image through pyxis and the image's binary as the
    task, with no ``bash -c`` around it (the upstream images have no shell). The host
    process-exporter keeps its look-up in bash; ``--local`` shows the host binaries."""
    from srt_services.testing import kit

    recipe = tmp_path / "r.yaml"
    recipe.write_text(JOB + "container: job-image\n")
    out = kit.run_cli(["dry-run", str(recipe), "--srun"], plugins=srt_plugins)
    assert out.code == 0, out.stderr
    lines = {x.split(":", 1)[0].strip(): x for x in out.stdout.splitlines() if ": srun " in x}
    node = lines["service_node-exporter_node1"]
    assert f"--container-image={NODE_IMAGE} " in node
    assert "--no-container-mount-home /bin/node_exporter " in node and "bash" not in node
    dcgm = lines["service_dcgm-exporter_node0"]
    assert f"--container-image={DCGM_IMAGE} " in dcgm
    assert "--no-container-mount-home dcgm-exporter --collect-interval=1000" in dcgm
    prom = lines["service_prometheus"]
    assert f"--container-image={PROMETHEUS_IMAGE} " in prom and " /bin/prometheus " in prom
    proc = lines["service_process-exporter_node0"]
    assert "--container-image" not in proc and " bash -c " in proc
    assert "--container-image=job-image" in lines["agg_0"]
    local = kit.run_cli(["dry-run", str(recipe), "--local"], plugins=srt_plugins)
    assert local.code == 0, local.stderr
    assert "container: quay.io" not in local.stdout
    assert "container: nvcr.io" not in local.stdout
    assert "command: prometheus-node-exporter " in local.stdout


def test_a_site_alias_points_the_default_image_at_a_mirror(srt_plugins: Any, tmp_path: Any) -> None:
    """An air-gapped site keys an alias by the default image's name: pyxis gets the mirror,
    and the command stays the upstream image's."""
    from srt_services.testing import kit

    site = tmp_path / "site.toml"
    site.write_text(f'[containers.aliases]\n"{NODE_IMAGE}" = "mirror/node-exporter:v1.8.2"\n')
    recipe = tmp_path / "r.yaml"
    recipe.write_text(JOB + "container: job-image\n")
    out = kit.run_cli(
        ["dry-run", str(recipe), "--srun", "--unit", "node-exporter"],
        plugins=srt_plugins,
        env={"SRT_SITE_CONFIG": str(site)},
    )
    assert out.code == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if "service_node-exporter_node0: srun" in x)
    assert "--container-image=mirror/node-exporter:v1.8.2 " in line
    assert " /bin/node_exporter " in line


def test_dry_run_shows_the_group_file_where_it_is_written(srt_plugins: Any, tmp_path: Any) -> None:
    """The spec's <log_dir>/process-exporter.yml, once (not under the work directory)."""
    from srt_services.testing import kit

    recipe = tmp_path / "r.yaml"
    recipe.write_text(JOB)
    out = kit.run_cli(["dry-run", str(recipe), "--unit", "process-exporter"], plugins=srt_plugins)
    assert out.code == 0, out.stderr
    files = [x.strip() for x in out.stdout.splitlines() if x.strip().startswith("file ")]
    assert files and all(x.startswith("file <job_dir>/logs/process-exporter.yml (") for x in files)
    prom = kit.run_cli(["dry-run", str(recipe), "--unit", "prometheus"], plugins=srt_plugins)
    assert "file <job_dir>/work/service_prometheus/prometheus.yml (" in prom.stdout


def test_a_generic_service_in_an_upstream_exporter_image_is_checked_too(srt_load: Any) -> None:
    """A recipe that moved a sidecar from the host packages to the upstream image and kept
    the Debian name; the image's own commands load."""
    bad = (
        "schema: 2\nname: g\nservices:\n"
        "  - name: ne\n"
        "    container: quay.io/prometheus/node-exporter:v1.8.2\n"
        "    command: [prometheus-node-exporter, --web.listen-address=:9101]\n"
    )
    with pytest.raises(RecipeError) as exc:
        srt_load(bad)
    text = str(exc.value)
    assert "recipe.yaml:6:15: services[ne].command[0]:" in text
    assert "is not in the image" in text
    srt_load(bad.replace("[prometheus-node-exporter,", "[/bin/node_exporter,"))
    srt_load(bad.replace("quay.io/prometheus/node-exporter", "site/tools"))
