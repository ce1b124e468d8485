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

from oarbank_protocol.documents import Status
from oarbank_protocol.errors import ExecError
from oarbank_protocol.execution.bundle import Bundle, load_bundle
from oarbank_protocol.execution.client import ProtocolClient
from oarbank_protocol.execution.sandbox import SitePolicy
from oarbank_protocol.lifecycle.probes import check_probe
from oarbank_protocol.platforms import platform_matches


@dataclass(frozen=True)
class Readiness:
    ready: bool
    detail: str


def _bundle(bundle: Bundle | Path) -> Bundle:
    return bundle if isinstance(bundle, Bundle) else load_bundle(bundle)


def _unsupported(kind: str, name: str, platforms: list[str], here: str) -> Readiness:
    return Readiness(
        False,
        f"{kind} {name!r} does not run on platform {here} (manifest platforms: "
        f"{', '.join(platforms)}); not calling it",
    )


async def service_ready(
    bundle: Bundle | Path,
    service: str,
    *,
    node_id: str,
    data_dir: Path,
    settings: Mapping[str, Any] | None = None,
    platform: str | None = None,
    timeout_s: float | None = None,
    timeouts: Mapping[str, float] | None = None,
    write_files: bool = True,
    tools: Mapping[str, Any] | None = None,
    site: SitePolicy | None = None,
) -> Readiness:
    """Run the service's ``ready`` op once (ManifestError for a bad bundle, else no raise).

    The op's timeout is the manifest's (``timeouts.ready``), then ``timeouts`` (the kind's
    per-op overrides), then ``timeout_s``. A service whose ``platforms`` exclude this node is
    never called. ``ready: true`` with ``running: false`` is a protocol violation, not ready.
    ``write_files=False`` leaves the agent's settings, tools and limits files alone.
    """
    loaded = _bundle(bundle)
    spec = loaded.manifest.service(service)
    context = loaded.context(
        node_id=node_id,
        data_dir=data_dir,
        settings=settings,
        platform=platform,
        write_files=write_files,
        tools=tools,
        site=site,
    )
    if not platform_matches(spec.platforms, context.platform):
        return _unsupported("service", service, spec.platforms, context.platform)
    executor = loaded.executor(spec, context, timeouts=timeouts)
    try:
        status = (await executor.call("ready", Status, timeout_s=timeout_s)).document
    except ExecError as exc:
        return Readiness(False, exc.reason)
    if status.ready and not status.running:
        return Readiness(
            False, "protocol violation: ready said ready=true while running=false; not ready"
        )
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
    tools: Mapping[str, Any] | None = None,
    site: SitePolicy | None = None,
) -> Readiness:
    """Fingerprint a probe once: ready means ``health == healthy``."""
    loaded = _bundle(bundle)
    spec = loaded.manifest.probe(probe)
    context = loaded.context(
        node_id=node_id,
        data_dir=data_dir,
        settings=settings,
        platform=platform,
        tools=tools,
        site=site,
    )
    if not platform_matches(spec.platforms, context.platform):
        return _unsupported("probe", probe, spec.platforms, context.platform)
    outcome = await check_probe(ProtocolClient(loaded.executor(spec, context)))
    return Readiness(outcome.healthy, outcome.detail)
