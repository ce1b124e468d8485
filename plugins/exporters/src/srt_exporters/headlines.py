"""The headline series ``srt metrics`` shows and plots: a few per kind, by what they mean.

Each is a PromQL expression over the labels srt puts on every target (``job_id``,
``service``, ``node``...), aggregated to one series per node (or per process group, per
worker). ``{sel}`` is replaced by the job's selector, so the expressions never mix jobs
when several share one Prometheus. The workers' request rate reads any counter named
``*requests_total`` that a role's metrics endpoint serves (vLLM, SGLang and Dynamo all
publish one), so it shows up as soon as a role declares ``metrics:``.
"""

from __future__ import annotations

from dataclasses import dataclass

from srt_exporters.prometheus import PROCESS_SCRAPE_FLOOR


@dataclass(frozen=True, slots=True)
class Headline:
    key: str
    title: str
    unit: str
    #: the kind (or ``workers``) whose targets serve it: listed only when the job has one
    source: str
    expr: str
    #: the label that tells its series apart
    by: str
    #: its targets are scraped at least this many seconds apart (process-exporter's
    #: floor), so its rate window must be wider than the job's interval alone asks
    slowest_scrape: float = 0.0


HEADLINES: tuple[Headline, ...] = (
    Headline(
        "cpu_busy",
        "CPU busy per node",
        "%",
        "node-exporter",
        '100 * (1 - avg by (node) (rate(node_cpu_seconds_total{{mode="idle",{sel}}}[{rate}])))',
        "node",
    ),
    Headline(
        "memory_used",
        "Memory used per node",
        "GiB",
        "node-exporter",
        "sum by (node) (node_memory_MemTotal_bytes{{{sel}}} - node_memory_MemAvailable_bytes{{{sel}}})"
        " / 2^30",
        "node",
    ),
    Headline(
        "gpu_util",
        "GPU utilisation per node",
        "%",
        "dcgm-exporter",
        "avg by (node) (DCGM_FI_DEV_GPU_UTIL{{{sel}}})",
        "node",
    ),
    Headline(
        "gpu_memory",
        "GPU memory used per node",
        "GiB",
        "dcgm-exporter",
        "sum by (node) (DCGM_FI_DEV_FB_USED{{{sel}}}) / 1024",
        "node",
    ),
    Headline(
        "process_cpu",
        "CPU per process group (all nodes)",
        "cores",
        "process-exporter",
        "sum by (groupname) (rate(namedprocess_namegroup_cpu_seconds_total{{{sel}}}[{rate}]))",
        "groupname",
        slowest_scrape=PROCESS_SCRAPE_FLOOR,
    ),
    Headline(
        "request_rate",
        "Requests per second per role",
        "req/s",
        "workers",
        'sum by (service) (rate({{__name__=~".+_requests_total",role=~"prefill|decode|agg",{sel}}}[{rate}]))',
        "service",
    ),
)


def expression(h: Headline, job_id: str, rate_window: str) -> str:
    sel = f'job_id="{_escaped(job_id)}"'
    return h.expr.format(sel=sel, rate=rate_window)


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
