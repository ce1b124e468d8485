"""Small helpers the engine builders share."""

from __future__ import annotations

from srt_srtctl.context import BuildContext
from srt_srtctl.topology import DIST_INIT_PORT, WorkerProcess


def dump_config_path(ctx: BuildContext, proc: WorkerProcess) -> str:
    """`--dump-config-to`: srtctl passes the host log dir (deviation dump-config-host-path)."""
    log_dir = "/logs" if ctx.fidelity.fixed("dump-config-host-path") else ctx.values.log_dir
    return f"{log_dir}/{proc.node}_config.json"


def leader_ip(ctx: BuildContext, proc: WorkerProcess) -> str:
    return ctx.values.ip(proc.endpoint_nodes[0])


def dist_init_addr(ctx: BuildContext, proc: WorkerProcess) -> str:
    return f"{leader_ip(ctx, proc)}:{DIST_INIT_PORT}"


def disaggregation_mode(proc: WorkerProcess) -> list[str]:
    return [] if proc.role == "agg" else ["--disaggregation-mode", proc.role]
