"""An exporter whose binary is missing on the node that runs it: that instance is
``unavailable`` (with the reason in ``srt status``'s state and events.jsonl) and the job
runs on; the look-up happens on the node, at launch, never at plan time on the host that
plans the job. The exporter binaries themselves are not needed: the missing one is a name
that exists nowhere."""

from __future__ import annotations

import json
from collections.abc import Callable

from srt_exporters import summary
from srt_services.extend import read_job
from srt_services.testing.jobs import Jobs, events_of, run_srt

MISSING = "srt-test-no-such-exporter"


def test_a_missing_exporter_is_unavailable_and_the_job_succeeds(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    port = srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: noexporter
        observability: {{metrics: false}}
        benchmark: {{type: command, command: [bash, -c, "sleep 1"]}}
        services:
          - name: node-exporter
            type: node-exporter
            placement: {{node: head}}
            options: {{port: {port}, binary: {MISSING}, if_missing: skip}}
        """,
        timeout=60,
    )
    assert run.code == 0, run.stderr
    step = "service_node-exporter"
    (event,) = events_of(run, "unavailable", step=step)
    assert MISSING in event["reason"] and event["node"] == "node0"
    state = run.state()["instances"][step]
    assert state["state"] == "unavailable"
    assert MISSING in state["reason"]
    assert state["restarts"] == 0
    assert len(events_of(run, "launched", step=step)) == 1, "never restarted"
    assert f"{step} unavailable on node0, the job runs without it: " in run.stdout + run.stderr
    shown = run_srt("status", run.job_dir, "--json")
    (row,) = [r for r in json.loads(shown.stdout)["instances"] if r["step"] == step]
    assert (row["state"], row["reason"]) == ("unavailable", event["reason"])
    text = run_srt("status", run.job_dir).stdout
    assert "unavailable: srt-node-exporter: cannot find" in text
    # the metrics summary names the node that ran without it, and why
    missing = summary.unavailable(read_job(run.job_dir))
    assert missing == [{"service": "node-exporter", "node": "node0", "reason": event["reason"]}]
    text = summary.render(
        {
            "job": {"name": "noexporter", "id": "x", "running": False, "status": "finished"},
            "source": {"url": "-", "live": False},
            "window": {"start": 0.0, "end": 1.0, "step": 1.0},
            "targets": [],
            "headlines": [],
            "unavailable": missing,
            "file_sd": "-",
        }
    )
    assert "Ran without (unavailable on their node" in text
    assert f"node-exporter  node0  {event['reason']}" in text


def test_if_missing_fail_still_fails_the_instance(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    port = srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: noexporter
        observability: {{metrics: false}}
        benchmark: {{type: command, command: [bash, -c, "sleep 1"]}}
        services:
          - name: node-exporter
            type: node-exporter
            placement: {{node: head}}
            restart: {{policy: "no"}}
            options: {{port: {port}, binary: {MISSING}, if_missing: fail}}
        """,
        timeout=60,
    )
    assert run.code == 0, run.stderr
    step = "service_node-exporter"
    assert not events_of(run, "unavailable", step=step)
    assert run.state()["instances"][step]["state"] == "failed"


def test_a_gated_service_that_is_unavailable_does_not_fail_its_phase(
    srt_jobs: Jobs, srt_free_port: Callable[[], int]
) -> None:
    """Prometheus has a readiness probe and starts in the first phase: its exit before
    it was ready is not the phase's failure when its node lacks the binary."""
    port = srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: noprom
        observability: {{metrics: false}}
        benchmark: {{type: command, command: [bash, -c, "sleep 1"]}}
        services:
          - name: prometheus
            type: prometheus
            options: {{port: {port}, binary: {MISSING}, if_missing: skip}}
        """,
        timeout=60,
    )
    assert run.code == 0, run.stderr
    state = run.state()["instances"]["service_prometheus"]
    assert state["state"] == "unavailable" and MISSING in state["reason"]
