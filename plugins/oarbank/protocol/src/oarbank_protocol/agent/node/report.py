"""The node agent's ``status`` answer: every module's services, probes, pools and
admissions, and the node's memory budget with what is charged against it.

A plain JSON-able dict, built from the managers' snapshots in one synchronous pass (so it
is consistent: nothing changes while it is built); clients (``srt oarbank status``, a
scheduler's prolog, a human) read it without importing anything of the agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oarbank_protocol.execution.sandbox import Confinement
from oarbank_protocol.lifecycle.manager import ModuleManager
from oarbank_protocol.lifecycle.resources import NodeResources


def module_status(manager: ModuleManager) -> dict[str, Any]:
    snap = manager.snapshot()
    capabilities = manager.capability_report()
    return {
        "services": {
            s: {
                "lifecycle": v.lifecycle,
                "state": v.state,
                "reason": v.reason,
                "available": v.available,
                "health": v.health,
                "users": list(v.users),
                "restart_count": v.restart_count,
                "pid": v.pid,
                "leftover_ids": list(v.leftover_ids),
                "freeze_ok": manager.services[s].spec.freeze_ok,
            }
            for s, v in snap.services.items()
        },
        "probes": {
            p: {"available": ok, "detail": capabilities[p].detail} for p, ok in snap.probes.items()
        },
        "pools": {
            "capacity": snap.resources.capacity,
            "reserved": snap.resources.reserved,
        },
        "admissions": list(snap.admissions),
    }


def node_status(
    node_id: str,
    managers: Mapping[str, ModuleManager],
    resources: NodeResources,
    confinements: Mapping[str, Confinement | None] | None = None,
) -> dict[str, Any]:
    """``confinements``: each module's sandbox (None or absent: it runs unconfined)."""
    modules = {name: module_status(manager) for name, manager in managers.items()}
    for name, report in modules.items():
        confinement = (confinements or {}).get(name)
        report["sandbox"] = confinement.describe() if confinement else {"confined": False}
    return {
        "node_id": node_id,
        "modules": modules,
        "memory": {
            "budget_gb": resources.mem_budget_gb,
            "charged_gb": resources.mem_charged_gb,
            "charges": resources.snapshot().charges,
            "host": host_memory_status(resources),
        },
    }


def host_memory_status(resources: NodeResources) -> dict[str, Any] | None:
    """The host's reading as the agent judges it (None: the budget alone is used)."""
    host = resources.host
    if host is None:
        return None
    reading = host.gauge()
    return {
        "available_gb": round(reading.available_gb, 3),
        "psi_some_avg10": reading.psi_some_avg10,
        "min_free_gb": host.min_free_gb,
        "psi_limit": host.psi_limit,
        "free_gb": round(host.free_gb(reading), 3),
        "under_pressure": host.shortfall_gb(reading) > 0,
    }
