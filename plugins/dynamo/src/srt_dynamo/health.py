"""A worker's readiness: its system server's ``/health`` saying ``ready``.

Dynamo's system server answers 503 ``notready`` until the worker's ``generate`` endpoint
registered (with ``DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS`` or canary checks on; without
either it never says ready), then 200 ``{"status": "ready", ...}``.
"""

from __future__ import annotations

from srt_services.extend import DefaultProbe


def system_probe(port: int, timeout: float) -> DefaultProbe:
    return DefaultProbe(
        "http",
        {
            "port": port,
            "path": "/health",
            "status": 200,
            "body": {"json": "status", "equals": "ready"},
        },
        timeout=timeout,
    )
