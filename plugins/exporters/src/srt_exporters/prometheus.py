"""The ``prometheus`` kind: the job's scraper, on the infra node, for the whole job.

It starts in the first phase (``infra``), so it sees every target from its launch, and it
stops last (``stops_last``: after the discovery plane), so the final samples of everything
it scrapes are kept. It scrapes what srt lists in ``<job_dir>/metrics/targets.json``
(``file_sd``), which srt rewrites as instances start, restart and stop, and keeps its
database in ``<job_dir>/metrics/tsdb``: the job's record, which ``srt metrics`` reads after
the job ended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    DefaultProbe,
    InstanceContext,
    MetricsSpec,
    Node,
    Port,
    ServiceSpec,
    url_host,
)

from srt_exporters.common import MetricsServerKind, MetricsServerOptions
from srt_exporters.images import PROMETHEUS_IMAGE, UpstreamImage

KIND = "prometheus"
CONFIG_FILE = "prometheus.yml"
#: Not Prometheus's usual 9090: that is the port many servers give their own metrics (the
#: spec's Ray example among them), and the job's Prometheus is implied onto the infra node
#: without the recipe asking, so it must not take a port a recipe commonly writes.
DEFAULT_PORT = 9099
#: The scrape job of the config; every target's ``job`` label is the srt job's name.
SCRAPE_JOB = "srt"


class PrometheusOptions(MetricsServerOptions):
    port: Port = Field(
        DEFAULT_PORT, description="Port of the web UI and HTTP API (and its /metrics)."
    )
    scrape_interval_seconds: float = Field(
        15.0,
        ge=1.0,
        le=3600.0,
        description="How often every target is scraped (process-exporter's at most every"
        " 2 s). The implied Prometheus's comes from `slurm.time`: 1 s without one.",
    )
    scrape_timeout_seconds: float | None = Field(
        None,
        gt=0,
        le=3600.0,
        description="A scrape that takes longer fails (default: the interval, at most 10 s).",
    )
    retention: str = Field(
        "10y",
        pattern=r"^[0-9]+(ms|s|m|h|d|w|y)$",
        description="How long samples are kept (--storage.tsdb.retention.time); the job's"
        " record should outlive the job, so it is long.",
    )


#: process-exporter reads every process's (and thread's) /proc files each time it is
#: scraped: measured on a machine with under 100 processes, 0.14 of a core at a 1-s
#: interval and 0.04 at 2 s; so its targets are scraped at most this often even when
#: everything else is faster (Prometheus itself took about 0.01-0.02 of a core)
PROCESS_SCRAPE_FLOOR = 2.0
#: the ``instance`` label of process-exporter's targets (its MetricsSpec name, then the node)
PROCESS_TARGETS = "process_exporter_.*"


def config_text(targets_file: str, interval: float, timeout: float | None) -> str:
    """The Prometheus config: one scrape job over the file srt keeps (JSON is YAML), and,
    when the interval is below :data:`PROCESS_SCRAPE_FLOOR`, a second over the same file
    that takes the process-exporter targets at that floor (the first drops them). The
    targets carry srt's ``job`` label, so both jobs' series look the same."""
    timeout = timeout if timeout is not None else min(interval, 10.0)
    sd = [
        # the watcher sees srt's renames at once; the re-read catches a shared file
        # system without inotify events from other nodes
        {"files": [targets_file], "refresh_interval": "30s"}
    ]
    main: dict[str, object] = {
        "job_name": SCRAPE_JOB,
        # srt writes job, service, role, node, instance and step on every target
        "honor_labels": False,
        "file_sd_configs": sd,
    }
    jobs = [main]
    if interval < PROCESS_SCRAPE_FLOOR:
        slow = PROCESS_SCRAPE_FLOOR
        pick = {"source_labels": ["instance"], "regex": PROCESS_TARGETS}
        main["relabel_configs"] = [{**pick, "action": "drop"}]
        jobs.append(
            {
                "job_name": f"{SCRAPE_JOB}-processes",
                "scrape_interval": f"{slow:g}s",
                "scrape_timeout": f"{min(max(timeout, interval), slow):g}s",
                "honor_labels": False,
                "file_sd_configs": sd,
                "relabel_configs": [{**pick, "action": "keep"}],
            }
        )
    config = {
        "global": {
            "scrape_interval": f"{interval:g}s",
            "scrape_timeout": f"{min(timeout, interval):g}s",
            "evaluation_interval": f"{interval:g}s",
        },
        "scrape_configs": jobs,
    }
    return json.dumps(config, indent=2) + "\n"


class PrometheusKind(MetricsServerKind):
    name: ClassVar[str] = KIND
    implied_by_summary: ClassVar[str] = "observability.metrics (on the infra node)"
    spec_departures: ClassVar[Mapping[str, str]] = {
        "implied by": "Not a kind of the specification (its tachometer scrapes the"
        " exporters); srt's `observability.metrics` implies a Prometheus on the infra node"
        " so that `srt metrics` can read the job's samples after it ended.",
        "command": "Not in the specification. Where the job runs in containers,"
        " `/bin/prometheus` in `quay.io/prometheus/prometheus:v2.53.2` (no job image has"
        " it); else the host's `prometheus`.",
        "ports": "9099, not Prometheus's 9090: recipes (the specification's Ray example"
        " among them) put their own metrics on 9090. Under `srt run` in its shared network"
        " mode a port the recipe did not write is a free one (every exporter's too), so two"
        " local jobs never collide (with a network namespace per virtual node the defaults"
        " stay: each node is a network of its own); the benchmark learns it from"
        " SRT_SERVICE_PROMETHEUS_URL.",
    }
    summary: ClassVar[str] = (
        "Prometheus scraping every target of the job (file_sd); TSDB in the job directory."
    )
    readiness_summary: ClassVar[str] = f"http /-/ready on {DEFAULT_PORT}"
    Options: ClassVar[type[PrometheusOptions]] = PrometheusOptions
    upstream: ClassVar[UpstreamImage | None] = PROMETHEUS_IMAGE
    command_summary: ClassVar[str] = (
        f"`{PROMETHEUS_IMAGE.binary}` in `{PROMETHEUS_IMAGE.default}` where the job runs in"
        " containers, else the host's `prometheus`"
    )
    binary_name: ClassVar[str] = "prometheus"
    install_hint: ClassVar[str] = (
        "install it (Debian: apt-get install prometheus), or set options.binary"
    )
    default_start: ClassVar[str] = "infra"
    default_placement: ClassVar[str] = "infra"
    allowed_placements: ClassVar[frozenset[str] | None] = frozenset({"head", "infra"})
    stops_last: ClassVar[bool] = True
    #: it writes the head block on SIGTERM; that takes seconds on a long job, not minutes
    default_stop_grace: ClassVar[float] = 60.0

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, PrometheusOptions)
        return [
            f"--config.file={{work_dir}}/{CONFIG_FILE}",
            f"--storage.tsdb.path={ctx.paths.tsdb_dir}",
            f"--storage.tsdb.retention.time={options.retention}",
            f"--web.listen-address={url_host(ctx.node.ip)}:{options.port}",
        ]

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        assert isinstance(options, PrometheusOptions)
        text = config_text(
            ctx.paths.scrape_targets_file,
            options.scrape_interval_seconds,
            options.scrape_timeout_seconds,
        )
        return {CONFIG_FILE: text}

    def readiness(
        self, spec: ServiceSpec, options: Any, ctx: InstanceContext
    ) -> DefaultProbe | None:
        # /-/ready answers 200 once the TSDB is open and the config loaded
        return DefaultProbe("http", {"port": options.port, "path": "/-/ready", "status": 200})

    def metrics(self, spec: ServiceSpec, options: Any) -> list[MetricsSpec]:
        return [MetricsSpec(port=options.port, name="prometheus")]

    def service_facts(
        self, spec: ServiceSpec, options: Any, nodes: Sequence[Node]
    ) -> dict[str, str]:
        # the benchmark queries the job's metrics without knowing the port srt chose
        assert isinstance(options, PrometheusOptions)
        return {"URL": f"http://{url_host(nodes[0].ip)}:{options.port}"}
