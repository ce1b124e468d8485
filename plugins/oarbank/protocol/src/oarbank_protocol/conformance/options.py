"""How a conformance run is set up: names, settings, timeouts, repeats, which checks.

Its own module because both the runner (which sets up the run) and the suite (whose checks
read the repeat count, the readiness deadline and the names) need it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from oarbank_protocol.execution.sandbox import SitePolicy
from oarbank_protocol.manifest import SandboxSpec


@dataclass
class RunnerOptions:
    bundle_root: Path = field(default_factory=Path.cwd)
    data_dir: Path | None = None
    service: str = "conformance"
    module: str = "conformance"
    node_id: str = "conformance-node"
    settings: dict[str, Any] = field(default_factory=dict)
    timeouts: dict[str, float] = field(default_factory=dict)
    ready_timeout_s: float = 60.0
    ready_poll_s: float = 0.2
    repeat: int = 3
    probe: bool = False
    spec_only: bool = False
    platform: str | None = None
    #: from the manifest entry: the service's fingerprint must say what memory it reserves
    reserves_host_memory: bool = False
    #: from the manifest entry: the agent may stop it for memory and start it again
    yieldable: bool = False
    #: from the manifest: the module's sandbox (None: it runs unconfined)
    sandbox: SandboxSpec | None = None
    #: what the site approves (the runner's --grant-* options)
    site: SitePolicy = field(default_factory=SitePolicy)
    tools: dict[str, Any] = field(default_factory=dict)
