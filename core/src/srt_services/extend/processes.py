"""Process helpers for plugins that start and stop processes themselves.

srt's own launchers use these; a plugin that runs a service outside the orchestrator (the
protocol adapter's exposed executables, a kind's helper) uses the same ones, so a process
it starts gets srt's environment rules, its own process group, a log opened for append,
and an identity (PID plus kernel start time) that survives PID reuse.
"""

from __future__ import annotations

from srt_services.launch.process import (
    COOKIE_VAR,
    INSTANCE_VAR,
    Spawned,
    alive,
    same_process,
    service_env,
    signal_group,
    signal_pid,
    spawn,
    start_ticks,
    tail,
    terminate_group,
    wrap_preamble,
)

__all__ = [
    "COOKIE_VAR",
    "INSTANCE_VAR",
    "Spawned",
    "alive",
    "same_process",
    "service_env",
    "signal_group",
    "signal_pid",
    "spawn",
    "start_ticks",
    "tail",
    "terminate_group",
    "wrap_preamble",
]
