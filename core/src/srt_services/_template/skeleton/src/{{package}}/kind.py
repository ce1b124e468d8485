"""The ``{{kind}}`` service kind.

A kind describes; srt acts. Everything here is pure: what argv to run, what environment to
give, which ports the process binds and how to tell it is ready. srt renders placeholders
such as ``{node_ip}`` and ``{work_dir}`` in every string returned here, exactly as it does in
the recipe, and the same plan is what ``srt dry-run`` prints and ``srt run`` executes.

This example runs a tiny HTTP server (``{{package}}.server``) with the Python that runs srt.
A kind that runs a server binary of its own should subclass ``ServerKind`` instead: it
looks the binary up on PATH, in srt's venv and in the site config's ``[binaries]`` table,
fails early with your install hint when it is missing, and owns the ``binary`` option,
the port ledger entries and ``external``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field
from srt_services.extend import DefaultProbe, KindOptions, ServiceKind

if TYPE_CHECKING:
    from srt_services.extend import InstanceContext, ServiceSpec


class {{Class}}Options(KindOptions):
    """``options:`` of a ``type: {{kind}}`` entry. Unknown keys are refused, naming the kind."""

    port: int = Field(28080, ge=1, le=65535, description="Port the server listens on.")
    message: str = Field("hello", description="What GET / answers.")


class {{Class}}(ServiceKind):
    name: ClassVar[str] = "{{kind}}"
    summary: ClassVar[str] = "Example HTTP service from the srt plugin template."
    readiness_summary: ClassVar[str] = "http /health on 28080"
    Options: ClassVar[type[{{Class}}Options]] = {{Class}}Options

    # Defaults a recipe may override. `start` is the phase (infra, before_workers,
    # after_frontend); `placement` a registered placement (`srt kinds` lists them).
    default_start: ClassVar[str] = "infra"
    default_critical: ClassVar[bool] = False
    default_placement: ClassVar[str] = "head"
    # Restrict placements when the service only makes sense on some nodes, e.g.
    # allowed_placements = frozenset({"head", "infra"}). None accepts every placement.
    allowed_placements: ClassVar[frozenset[str] | None] = None
    default_readiness_timeout: ClassVar[float] = 30.0

    def command(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> list[str] | None:
        return [
            sys.executable,
            "-m",
            "{{package}}.server",
            "--host",
            "{node_ip}",
            "--port",
            str(options.port),
        ]

    def default_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        # The recipe's `env:` overrides these.
        return {"{{ENV}}_MESSAGE": options.message}

    def forced_env(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> dict[str, str]:
        # These win over the recipe (srt warns when a recipe sets one): only for values the
        # service cannot work without.
        return {"{{ENV}}_NODE": "{node}"}

    def readiness(
        self, spec: ServiceSpec, options: Any, ctx: InstanceContext
    ) -> DefaultProbe | None:
        return DefaultProbe("http", {"port": options.port, "path": "/health"})

    def listen_ports(self, spec: ServiceSpec, options: Any) -> Sequence[int]:
        # Every port the command binds: srt refuses a plan where two services would bind
        # the same port on a node, before anything starts.
        return [options.port]
