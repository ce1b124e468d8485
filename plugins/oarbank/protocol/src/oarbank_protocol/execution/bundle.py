"""A module bundle on disk: ``DIR/oarbank-module.json`` plus the executables it names.

Layout::

    DIR/
      oarbank-module.json     manifest: name, services[], probes[]
      bin/...                 executables (any layout; exec paths are relative to DIR)

Relative exec paths are resolved against DIR and may not climb out of it; bare names
(``python3``) are looked up on the executor's PATH; absolute paths are used as given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oarbank_protocol.errors import ManifestError
from oarbank_protocol.execution.environment import SAFE_PATH, ExecContext
from oarbank_protocol.execution.executor import ExecLimits, Executor
from oarbank_protocol.execution.sandbox import SitePolicy, resolve
from oarbank_protocol.manifest import (
    MANIFEST_FILE,
    OPS,
    ModuleManifest,
    ProbeSpec,
    ServiceSpec,
    load_manifest,
)
from oarbank_protocol.platforms import current_platform


def _check_exec_inside(root: Path, name: str, argv0: str) -> None:
    if "/" not in argv0 or os.path.isabs(argv0):
        return
    joined = os.path.normpath(os.path.join(root, argv0))
    if os.path.commonpath([joined, str(root)]) != str(root):
        raise ManifestError(f"{name}: exec path {argv0!r} leaves the bundle directory")


@dataclass(frozen=True)
class Bundle:
    root: Path
    manifest: ModuleManifest

    @property
    def name(self) -> str:
        return self.manifest.name

    def context(
        self,
        *,
        node_id: str,
        data_dir: Path,
        settings: Mapping[str, Any] | None = None,
        tools: Mapping[str, Any] | None = None,
        limits: Mapping[str, Any] | None = None,
        platform: str | None = None,
        path: str = SAFE_PATH,
        extra_env: Mapping[str, str] | None = None,
        secret_keys: frozenset[str] = frozenset(),
        write_files: bool = True,
        site: SitePolicy | None = None,
    ) -> ExecContext:
        """The :class:`ExecContext` for running this bundle's executables on one node.

        A manifest with a ``sandbox`` table runs confined with the grants ``site`` approves
        (default: none, and unconfined only if bubblewrap is missing and the site allows it);
        its tools file then holds only the tools it declares, the ones bound in.
        """
        spec = self.manifest.sandbox
        granted_tools = dict(tools or {})
        confinement = resolve(
            self.manifest.name,
            spec,
            site or SitePolicy(),
            bundle_root=self.root,
            data_dir=data_dir,
            tools=granted_tools,
        )
        if spec is not None:
            granted_tools = {name: granted_tools[name] for name in spec.tools}
        return ExecContext(
            bundle_root=self.root,
            module=self.manifest.name,
            node_id=node_id,
            data_dir=data_dir,
            platform=platform or current_platform(),
            settings=dict(settings or {}),
            tools=granted_tools,
            limits=dict(limits or {}),
            path=path,
            extra_env=dict(extra_env or {}),
            secret_keys=secret_keys,
            write_files=write_files,
            confinement=confinement,
        )

    def executor(
        self,
        entry: ServiceSpec | ProbeSpec,
        context: ExecContext,
        *,
        limits: ExecLimits | None = None,
        timeouts: Mapping[str, float] | None = None,
    ) -> Executor:
        """An executor for one service or probe with the manifest's timeouts applied."""
        merged = {**entry_timeouts(entry), **(timeouts or {})}
        return Executor(entry.exec, context, service=entry.name, timeouts=merged, limits=limits)


def entry_timeouts(entry: ServiceSpec | ProbeSpec) -> dict[str, float]:
    """The op timeouts a manifest entry sets (the spec's table covers the rest)."""
    merged: dict[str, float] = {}
    if isinstance(entry, ServiceSpec):
        for op in OPS:
            value = entry.op_timeout(op)
            if value is not None:
                merged[op] = value
    else:
        merged["fingerprint"] = entry.timeout_s
    return merged


def load_bundle(root: Path) -> Bundle:
    root = Path(os.path.abspath(root))
    if not root.is_dir():
        raise ManifestError(f"bundle directory {root} does not exist")
    manifest = load_manifest(root / MANIFEST_FILE)
    entries: list[ServiceSpec | ProbeSpec] = [*manifest.services, *manifest.probes]
    for entry in entries:
        _check_exec_inside(root, entry.name, entry.exec[0])
    return Bundle(root, manifest)
