"""The site's sandbox approvals as a recipe writes them (``options.sandbox``).

The recipe is where a site's operator says what the module may reach on this cluster; the
module's manifest says what it needs. The two meet in the protocol library's
:func:`~oarbank_protocol.execution.sandbox.resolve`, the same for the agent srt launches and
for srt's own readiness probe, so both run the module under the same confinement.
"""

from __future__ import annotations

from pathlib import Path

from oarbank_protocol.execution.sandbox import SitePolicy
from pydantic import Field, field_validator
from srt_services.extend import StrictModel


class SandboxApproval(StrictModel):
    grant_paths: list[str] = Field(
        default_factory=list,
        description="Host directories inside which the module's declared paths are approved.",
    )
    network: bool = Field(False, description="Approve network for a module that declares it.")
    allow_unconfined: bool = Field(
        False,
        description="Run a module that declares a sandbox unconfined on a node without "
        "bubblewrap (refused otherwise).",
    )

    @field_validator("grant_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not path.startswith("/") or "\x00" in path:
                raise ValueError(f"{path!r}: an approved path must be absolute (every node)")
        return paths

    def site(self) -> SitePolicy:
        return SitePolicy(
            approved_paths=tuple(Path(p) for p in self.grant_paths),
            allow_network=self.network,
            allow_unconfined=self.allow_unconfined,
        )

    def agent_args(self) -> list[str]:
        """The agent's command-line options saying the same."""
        args: list[str] = []
        for path in self.grant_paths:
            args += ["--grant-path", path]
        if self.network:
            args.append("--grant-network")
        if self.allow_unconfined:
            args.append("--allow-unconfined")
        return args
