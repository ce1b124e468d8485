"""The exporter kinds: ``node-exporter``, ``process-exporter``, ``dcgm-exporter``.

Each serves one Prometheus endpoint on a port it owns, on every node it is placed on, and
declares it (:meth:`metrics`), so srt lists it in the job's scrape targets. They bind the
node's address rather than every interface: virtual nodes of a local job (127.0.0.x) then
each get their own, and a host exporter a site already runs on the port elsewhere is left
alone. None has a readiness probe (the spec's "the exporters none"): nothing waits for them,
and a failing exporter fails its instance, never the job.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from pydantic import Field
from srt_services.extend import (
    InstanceContext,
    KindOptions,
    MetricsSpec,
    Port,
    Problem,
    Recipe,
    ServiceSpec,
    url_host,
)

from srt_exporters.common import IfMissing, MetricsServerKind, MetricsServerOptions
from srt_exporters.images import DCGM_IMAGE, NODE_IMAGE, PROCESS_IMAGE, UpstreamImage

#: how the spec's exporters are implied (srt's switch, not the spec's tachometer)
IMPLIED_BY = (
    "`observability.metrics` (srt's switch; the specification's tachometer is not part of srt)"
)
#: node and DCGM exporters run per compute node (the spec says per worker node)
ON_COMPUTE_NODES = IMPLIED_BY + ", on every compute node rather than every worker node."
#: how node and DCGM exporters depart from the spec's command: its image, with a pinned tag
SPEC_IMAGE = (
    "The specification's image and command where the job runs in containers"
    " (a job container, or one on the frontend, the benchmark or a worker), with a pinned tag"
    " so that a rerun pulls the same exporter"
)


def image_or_host(image: UpstreamImage, host_binary: str) -> str:
    """``command_summary`` of an exporter that runs its upstream image where the job runs in
    containers, else the host's binary."""
    return (
        f"`{image.binary}` in `{image.default}` where the job runs in containers,"
        f" else the host's `{host_binary}`"
    )


class ExporterKind(MetricsServerKind):
    """An exporter kind of this plugin: one ``/metrics`` endpoint, declared so srt lists it
    in the scrape targets, and, as the spec has them, no readiness probe (nothing waits
    for an exporter) and a short stop grace (an exporter holds no state to flush)."""

    readiness_summary: ClassVar[str] = "none"
    default_stop_grace: ClassVar[float] = 10.0
    #: the scrape target's name
    metrics_name: ClassVar[str]

    def metrics(self, spec: ServiceSpec, options: Any) -> list[MetricsSpec]:
        return [MetricsSpec(port=options.port, name=self.metrics_name)]


# --------------------------------------------------------------------------- node-exporter

NODE = "node-exporter"
NODE_COLLECTORS = ("cpu", "infiniband", "meminfo")


class NodeExporterOptions(MetricsServerOptions):
    port: Port = Field(9101, description="Port of /metrics (off 9100, which hosts often use).")
    collectors: list[str] = Field(
        default_factory=lambda: list(NODE_COLLECTORS),
        description="Collectors to enable (all others are off). infiniband keeps running,"
        " reporting nothing, on nodes without InfiniBand.",
        min_length=1,
    )
    collect_interval_ms: int | None = Field(
        None,
        ge=1,
        description="Accepted as the spec lists it; node_exporter reads its collectors when"
        " it is scraped, so the scrape interval decides (a warning says so).",
    )


class NodeExporterKind(ExporterKind):
    name: ClassVar[str] = NODE
    implied_by_summary: ClassVar[str] = "observability.metrics (on every compute node)"
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": SPEC_IMAGE + " (`quay.io/prometheus/node-exporter:v1.8.2`). Without"
        " images (and under `srt run`, whose launcher runs none) srt runs the host package's"
        " `prometheus-node-exporter` on the bare node, looked up on each node at launch; the"
        " specification has no bare-host default.",
        "implied by": ON_COMPUTE_NODES,
    }
    summary: ClassVar[str] = (
        "Prometheus node exporter (cpu, infiniband, meminfo) on every worker node."
    )
    Options: ClassVar[type[NodeExporterOptions]] = NodeExporterOptions
    upstream: ClassVar[UpstreamImage | None] = NODE_IMAGE
    command_summary: ClassVar[str] = image_or_host(NODE_IMAGE, "prometheus-node-exporter")
    binary_name: ClassVar[str] = "prometheus-node-exporter"
    metrics_name: ClassVar[str] = "node_exporter"
    install_hint: ClassVar[str] = (
        "install it (Debian: apt-get install prometheus-node-exporter), or set"
        " options.binary (upstream's node_exporter works too)"
    )
    default_placement: ClassVar[str] = "workers"

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, NodeExporterOptions)
        return [
            f"--web.listen-address={url_host(ctx.node.ip)}:{options.port}",
            "--collector.disable-defaults",
            *(f"--collector.{c}" for c in options.collectors),
        ]

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        assert isinstance(options, NodeExporterOptions)
        yield from super().validate(spec, options, recipe)
        if options.collect_interval_ms is not None:
            yield Problem(
                ("options", "collect_interval_ms"),
                "node_exporter has no collection interval: it reads its collectors each time"
                " it is scraped, so this changes nothing; set the prometheus service's"
                " options.scrape_interval_seconds instead",
                warning=True,
            )


# --------------------------------------------------------------------------- process-exporter

PROCESS = "process-exporter"


def group_file(spec: ServiceSpec) -> str:
    """Where the group file goes: the job's log directory, as the spec has it
    (``<log_dir>/process-exporter.yml`` for the implied service), named after the service
    so that two process-exporter entries never share one. All the service's instances
    write the same text there; a container sees it, since the job directory is mounted."""
    return f"{{log_dir}}/{spec.name}.yml"


class ProcessGroup(KindOptions):
    """A group of processes that process-exporter reports as one (first match wins)."""

    name: str = Field(description="The group's name (the groupname label).", min_length=1)
    comm: list[str] = Field(default_factory=list, description="Exact process names.")
    cmdline: list[str] = Field(
        default_factory=list, description="Regular expressions that must all match the argv."
    )


#: What a job runs, grouped like the original's config: first match wins, no catch-all
#: (a process matching no group is not reported).
BUILTIN_GROUPS: tuple[ProcessGroup, ...] = (
    ProcessGroup(name="frontend", cmdline=[r"dynamo\.frontend"]),
    ProcessGroup(name="vllm", cmdline=[r"vllm"]),
    ProcessGroup(name="sglang", cmdline=[r"sglang"]),
    ProcessGroup(name="trtllm", cmdline=[r"tensorrt_llm|trtllm"]),
    ProcessGroup(name="vllm_router", cmdline=[r"vllm[_-]router"]),
    ProcessGroup(name="aiperf", cmdline=[r"aiperf"]),
    ProcessGroup(name="agentperf", cmdline=[r"agentperf"]),
    ProcessGroup(name="etcd", comm=["etcd"]),
    ProcessGroup(name="nats", comm=["nats-server"]),
    ProcessGroup(name="prometheus", comm=["prometheus"]),
    ProcessGroup(name="node_exporter", comm=["prometheus-node", "node_exporter"]),
    ProcessGroup(name="process_exporter", comm=["prometheus-proc", "process-exporte"]),
    ProcessGroup(name="dcgm_exporter", comm=["dcgm-exporter"]),
)


class ProcessExporterOptions(MetricsServerOptions):
    port: Port = Field(9256, description="Port of /metrics.")
    if_missing: IfMissing = Field(
        "skip",
        description="`skip` (default, as the spec says: per-process telemetry is skipped with"
        " a warning when the binary is missing) or `fail`.",
    )
    groups: list[ProcessGroup] = Field(
        default_factory=list,
        description="Your own process groups (the implied service's: one per service, role"
        " and frontend with a `command`, named after it), matched before the built-in ones"
        " (frontend, engines, etcd, nats, prometheus, the exporters).",
    )


def _quoted(text: str) -> str:
    """A YAML double-quoted scalar; braces as escapes, so srt's ``{placeholder}`` rendering
    of kind files leaves a regex's ``{2,}`` alone."""
    return json.dumps(text).replace("{", "\\x7B").replace("}", "\\x7D")


def group_config(groups: list[ProcessGroup]) -> str:
    lines = [
        "# written by srt-exporters: process groups for prometheus-process-exporter",
        "# (first match wins; processes matching no group are not reported)",
        "process_names:",
    ]
    for g in [*groups, *BUILTIN_GROUPS]:
        lines.append(f"  - name: {_quoted(g.name)}")
        if g.comm:
            lines.append("    comm: [" + ", ".join(_quoted(c) for c in g.comm) + "]")
        if g.cmdline:
            lines.append("    cmdline: [" + ", ".join(_quoted(c) for c in g.cmdline) + "]")
    return "\n".join(lines) + "\n"


class ProcessExporterKind(ExporterKind):
    name: ClassVar[str] = PROCESS
    implied_by_summary: ClassVar[str] = "observability.metrics (on every node)"
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": "The specification runs the static binary `make setup` installs; srt runs"
        " Debian's `prometheus-process-exporter` (or `options.binary`), on the bare node. A"
        " declared `container` runs the image's `/bin/process-exporter`, as the specification"
        " says, with the group file in the job's log directory (mounted at its own path, not"
        " at `/logs`).",
        "implied by": IMPLIED_BY + ".",
    }
    summary: ClassVar[str] = (
        "Per-process-group CPU, memory and threads on every node (host binary; skipped if absent)."
    )
    Options: ClassVar[type[ProcessExporterOptions]] = ProcessExporterOptions
    upstream: ClassVar[UpstreamImage | None] = PROCESS_IMAGE
    command_summary: ClassVar[str] = (
        f"the host's `prometheus-process-exporter`; in a declared image `{PROCESS_IMAGE.binary}`"
    )
    binary_name: ClassVar[str] = "prometheus-process-exporter"
    metrics_name: ClassVar[str] = "process_exporter"
    install_hint: ClassVar[str] = (
        "install it (Debian: apt-get install prometheus-process-exporter), or set options.binary"
    )
    default_placement: ClassVar[str] = "all"

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        # process-exporter's flags take one dash (Go's flag package)
        return [
            "-config.path",
            group_file(spec),
            "-web.listen-address",
            f"{url_host(ctx.node.ip)}:{options.port}",
            "-threads=true",
            "-children=false",
            "-recheck=false",
        ]

    def files(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        assert isinstance(options, ProcessExporterOptions)
        return {group_file(spec): group_config(options.groups)}


# --------------------------------------------------------------------------- dcgm-exporter

DCGM = "dcgm-exporter"


class DcgmExporterOptions(MetricsServerOptions):
    port: Port = Field(9401, description="Port of /metrics (off 9400, which hosts often use).")
    collect_interval_ms: int = Field(
        1000, ge=100, le=3_600_000, description="How often DCGM samples the GPUs."
    )


class DcgmExporterKind(ExporterKind):
    name: ClassVar[str] = DCGM
    implied_by_summary: ClassVar[str] = "observability.metrics (on every compute node)"
    spec_departures: ClassVar[Mapping[str, str]] = {
        "command": SPEC_IMAGE
        + " (`nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04`, the tag of the"
        " specification's mirror example). Without images (and under `srt run`) srt runs a"
        " host binary `dcgm-exporter` on the bare node, looked up on each node at launch.",
        "implied by": ON_COMPUTE_NODES,
    }
    summary: ClassVar[str] = "NVIDIA DCGM exporter: GPU utilisation, memory, power per GPU."
    Options: ClassVar[type[DcgmExporterOptions]] = DcgmExporterOptions
    upstream: ClassVar[UpstreamImage | None] = DCGM_IMAGE
    command_summary: ClassVar[str] = image_or_host(DCGM_IMAGE, "dcgm-exporter")
    binary_name: ClassVar[str] = "dcgm-exporter"
    metrics_name: ClassVar[str] = "dcgm"
    install_hint: ClassVar[str] = (
        "it ships with NVIDIA's container image nvcr.io/nvidia/k8s/dcgm-exporter (srt runs"
        " it where the job has a container; or set container) or NVIDIA's CUDA repository;"
        " it needs a GPU and its driver (NVML)"
    )
    default_placement: ClassVar[str] = "workers"

    def server_args(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str]:
        assert isinstance(options, DcgmExporterOptions)
        return [
            f"--collect-interval={options.collect_interval_ms}",
            "--address",
            f"{url_host(ctx.node.ip)}:{options.port}",
        ]
