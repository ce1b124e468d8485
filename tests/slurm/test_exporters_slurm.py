"""srt-exporters on the 3-node Slurm cluster: exporters on every node, one Prometheus on the
infra node scraping them all through the file_sd list srt keeps (issue 15's Slurm variant).

Needs srt-exporters (skipped without it, an error with SRT_REQUIRE_EXPORTERS=1 as in the
`suite` tox environment) and the Debian prometheus and exporters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

if os.environ.get("SRT_REQUIRE_EXPORTERS") != "1":
    pytest.importorskip("srt_exporters", reason="needs srt-exporters (plugins/exporters)")

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.component,
    pytest.mark.skipif(
        any(
            shutil.which(b) is None
            for b in ("prometheus", "prometheus-node-exporter", "prometheus-process-exporter")
        ),
        reason="needs prometheus and the Debian exporters",
    ),
]

# The benchmark, on the head node: waits until Prometheus (on the infra node) has every
# planned target up, prints what it saw, and fails after 90 s.
CHECK = r"""
import json, os, sys, time, urllib.parse, urllib.request
want = int(sys.argv[1])
url = os.environ["SRT_SERVICE_PROMETHEUS_URL"] + "/api/v1/query?"
deadline = time.time() + 90
up = []
while time.time() < deadline:
    q = urllib.parse.urlencode({"query": 'up{job="slurmmetrics"} == 1'})
    up = json.load(urllib.request.urlopen(url + q, timeout=5))["data"]["result"]
    if len(up) >= want:
        break
    time.sleep(1)
for r in sorted(up, key=lambda r: r["metric"]["instance"]):
    m = r["metric"]
    print("UP", m["instance"], m["node"], m["service"], flush=True)
sys.exit(0 if len(up) >= want else 1)
"""


def test_every_node_is_scraped_by_one_prometheus_on_the_infra_node(
    slurm_cluster_3: Any, submit: Any
) -> None:
    cluster = slurm_cluster_3
    # 3 nodes of workers: node-exporter on each, process-exporter on each, prometheus on
    # the infra node (n1, the head); dcgm-exporter is implied too and unavailable on every
    # node (no binary there)
    expected = 3 + 3 + 1  # node, process, and prometheus itself
    job = submit(
        f"""
        schema: 2
        name: slurmmetrics
        slurm: {{signal_before_end_seconds: 0}}
        resources: {{gpus_per_node: 1}}
        frontend:
          type: sglang
          port: 9081
          command: [python3, -m, http.server, "9081", --bind, "{{node_ip}}"]
        roles:
          agg:
            workers: 3
            command: [python3, -c, "import time; time.sleep(600)"]
        benchmark: {{type: command, command: [python3, -c, {json.dumps(CHECK)}, "{expected}"]}}
        services:
          - name: prometheus
            type: prometheus
            options: {{scrape_interval_seconds: 1}}
        """,
        "metrics",
    )
    job.wait_done(180)
    sbatch = job.sbatch_log()
    bench = job.log("benchmark")
    assert job.result()["exit_code"] == 0, sbatch + bench
    # dcgm-exporter has no binary on the compute nodes: each node found that out itself,
    # at launch, and the job ran without it (nothing was dropped on the batch host)
    assert "services[dcgm-exporter] skipped" not in sbatch
    missing = {e["node"]: e["reason"] for e in job.events("unavailable")}
    assert set(missing) == {"n1", "n2", "n3"}, missing
    assert all("dcgm-exporter" in r for r in missing.values())

    nodes_of: dict[str, set[str]] = {}
    for e in job.events("launched"):
        nodes_of.setdefault(e["unit"], set()).add(e["node"])
    assert nodes_of["node-exporter"] == nodes_of["process-exporter"] == {"n1", "n2", "n3"}
    assert nodes_of["prometheus"] == {"n1"}
    seen = [line.split() for line in bench.splitlines() if line.startswith("UP ")]
    assert {(i, n) for _, i, n, s in seen if s == "node-exporter"} == {
        (f"node_exporter_{n}", n) for n in ("n1", "n2", "n3")
    }
    assert {n for _, _, n, s in seen if s == "process-exporter"} == {"n1", "n2", "n3"}
    # every exporter bound its node's own address, which Prometheus scraped
    for t in job.plan()["scrape_targets"]:
        assert t["address"].split(":")[0] == cluster.node_ips[t["node"]]
    stops = [e["step"] for e in job.events("exited")]
    assert stops[-1] == "service_prometheus", "Prometheus stops last"

    job.assert_nothing_left()

    # the record on the shared job directory, read from here after the job
    report = subprocess.run(
        [sys.executable, "-m", "srt_services", "metrics", str(job.job_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.returncode == 0, report.stderr
    rows = {t["instance"]: t for t in json.loads(report.stdout)["targets"]}
    for n in ("n1", "n2", "n3"):
        assert rows[f"node_exporter_{n}"]["scrapes"] > 0
    ran_without = json.loads(report.stdout)["unavailable"]
    assert {(m["service"], m["node"]) for m in ran_without} == {
        ("dcgm-exporter", n) for n in ("n1", "n2", "n3")
    }


def test_an_exporter_found_on_the_compute_nodes_but_not_by_the_batch_step_runs_there(
    slurm_cluster_3: Any, submit: Any, shell: Any, tmp_path: Any
) -> None:
    """Issue 27's real-cluster case: the exporter is installed where the job's steps run
    and not where the batch step plans the job. The test nodes share one file system, so
    the difference is in the search path: the site names a binary (``[binaries]``) that
    only the node steps' PATH (the service's ``env``) reaches. Planning on the batch host
    must not decide it is missing; each node looks it up at launch and runs it."""
    name = "srt-nodes-only-node-exporter"
    only_nodes = tmp_path / "node-bin"
    only_nodes.mkdir()
    host_binary = shutil.which("prometheus-node-exporter")
    assert host_binary is not None
    (only_nodes / name).symlink_to(host_binary)
    site = tmp_path / "site.toml"
    site.write_text(f'[binaries]\n"prometheus-node-exporter" = "{name}"\n')
    # the batch step gets the PATH srt apply runs with: the binary is not on it
    assert shutil.which(name, path=shell.env["PATH"]) is None
    node_path = f"{only_nodes}:/usr/local/bin:/usr/bin:/bin"
    expected = 3 + 1  # node-exporter on each node, and prometheus itself
    job = submit(
        f"""
        schema: 2
        name: slurmmetrics
        slurm: {{signal_before_end_seconds: 0}}
        resources: {{gpus_per_node: 1}}
        frontend:
          type: sglang
          port: 9082
          command: [python3, -m, http.server, "9082", --bind, "{{node_ip}}"]
        roles:
          agg:
            workers: 3
            command: [python3, -c, "import time; time.sleep(600)"]
        benchmark: {{type: command, command: [python3, -c, {json.dumps(CHECK)}, "{expected}"]}}
        services:
          - name: prometheus
            type: prometheus
            options: {{scrape_interval_seconds: 1}}
          - name: node-exporter
            type: node-exporter
            options: {{if_missing: fail}}
            env: {{PATH: "{node_path}"}}
          - {{name: dcgm-exporter, enabled: false}}
          - {{name: process-exporter, enabled: false}}
        """,
        "nodes-only",
        extra_env={"SRT_SITE_CONFIG": str(site)},
    )
    job.wait_done(180)
    sbatch = job.sbatch_log()
    bench = job.log("benchmark")
    assert job.result()["exit_code"] == 0, sbatch + bench
    assert "skipped" not in sbatch and "cannot find" not in sbatch, sbatch
    assert not job.events("unavailable")
    launched = {e["node"] for e in job.events("launched") if e["unit"] == "node-exporter"}
    assert launched == {"n1", "n2", "n3"}
    for n in ("n1", "n2", "n3"):
        log = job.log(f"service_node-exporter_{n}")
        assert "cannot find" not in log, log
    seen = [line.split() for line in bench.splitlines() if line.startswith("UP ")]
    assert {n for _, _, n, s in seen if s == "node-exporter"} == {"n1", "n2", "n3"}, bench
    # what ran is the site's name, found through the node steps' PATH
    units = {u["name"]: u for u in job.plan()["units"]}
    assert {i["argv"][0] for i in units["node-exporter"]["instances"]} == {name}
    job.assert_nothing_left()
