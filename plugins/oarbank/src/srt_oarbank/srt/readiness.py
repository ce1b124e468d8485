"""One-shot readiness checks for srt: a service's protocol ``ready``, a probe's fingerprint.

srt's ``oarbank`` kind gates on the service's own ``ready`` op, and the ``oarbank-probe``
readiness probe gates on a probe executable's fingerprint. Both must answer "not yet, because
..." rather than raise when the executable misbehaves, so a readiness loop can keep polling
and show the reason when it gives up. Call them with the same ``data_dir`` and settings the
agent uses, so the executable sees the same state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srt_oarbank.execution.bundle import Bundle, load_bundle
from srt_oarbank.execution.client import ProtocolClient
from srt_oarbank.lifecycle.probes import check_probe
from srt_oarbank.protocol.documents import Status
from srt_oarbank.protocol.errors import ExecError


@dataclass(frozen=True)
class Readiness:
    ready: bool
    detail: str


def _bundle(bundle: Bundle | Path) -> Bundle:
    return bundle if isinstance(bundle, Bundle) else load_bundle(bundle)


async def service_ready(
    bundle: Bundle | Path,
    service: str,
    *,
    node_id: str,
    data_dir: Path,
    settings: Mapping[str, Any] | None = None,
    platform: str | None = None,
    timeout_s: float | None = None,
) -> Readiness:
    """Run the service's ``ready`` op once (ManifestError for a bad bundle, else no raise)."""
    loaded = _bundle(bundle)
    spec = loaded.manifest.service(service)
    context = loaded.context(
        node_id=node_id, data_dir=data_dir, settings=settings, platform=platform
    )
    executor = loaded.executor(spec, context)
    try:
        status = (await executor.call("ready", Status, timeout_s=timeout_s)).document
    except ExecError as exc:
        return Readiness(False, exc.reason)
    if status.ready:
        return Readiness(True, status.detail or "ready")
    return Readiness(False, status.detail or f"running={status.running}, ready=false")


async def probe_ready(
    bundle: Bundle | Path,
    probe: str,
    *,
    node_id: str,
    data_dir: Path,
    settings: Mapping[str, Any] | None = None,
    platform: str | None = None,
) -> Readiness:
    """Fingerprint a probe once: ready means ``health == healthy``."""
    loaded = _bundle(bundle)
    spec = loaded.manifest.probe(probe)
    context = loaded.context(
        node_id=node_id, data_dir=data_dir, settings=settings, platform=platform
    )
    outcome = await check_probe(ProtocolClient(loaded.executor(spec, context)))
    return Readiness(outcome.healthy, outcome.detail)
