"""What the exporter kinds and the ``prometheus`` kind share: the ``if_missing`` rule, one port.

Metrics are on by default, so these kinds are implied on machines that may not have the
binaries (a laptop, a compute node without DCGM). An implied one looks its binary up on the
node that runs it, at launch; where it is missing that instance is ``unavailable`` and the
job runs; a declared one fails clearly unless it says ``if_missing: skip``.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import Field
from srt_services.extend import (
    InstanceContext,
    Problem,
    Recipe,
    ServerKind,
    ServerOptions,
    ServiceSpec,
    venv_bin,
)

from srt_exporters.images import UpstreamImage, job_runs_in_containers, refusal

IfMissing = Literal["fail", "skip"]

#: What the implied services carry; a recipe that declares the service decides itself.
REASON = "observability.metrics"


#: ports handed out by this process: the kernel may offer a closed one again, and two
#: services of one plan must not get the same
_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on now, on the loopback network local jobs run on."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def find_binary(binary: str) -> str | None:
    """Where ``binary`` is on this machine: an absolute path that is executable, or a
    name on PATH, then in srt's own venv ``bin`` (the same order the launch check uses)."""
    if "/" in binary:
        return binary if os.path.isfile(binary) and os.access(binary, os.X_OK) else None
    found = shutil.which(binary)
    if found:
        return found
    extra = os.path.join(venv_bin(), binary)
    return extra if os.path.isfile(extra) and os.access(extra, os.X_OK) else None


class MetricsServerOptions(ServerOptions):
    """Options every kind of this plugin has."""

    binary: str | None = Field(
        None,
        description="Server binary: a command name looked up on PATH (then in srt's own venv"
        " bin directory) or an absolute path. Default: in a recognised upstream image (the"
        " kind's default where the job runs in containers, or a declared one) the command"
        " that image has; on the bare node the site config's [binaries] entry for this kind,"
        " else the host package's command name. Writing it keeps the bare node unless the"
        " entry writes `container`; srt validate refuses one an upstream image does not have.",
    )

    if_missing: IfMissing = Field(
        "fail",
        description="What happens when the binary is not on the node an instance runs on,"
        " looked up there at launch: `fail` (the instance fails with the install hint) or"
        " `skip` (that instance is `unavailable`, with the reason in `srt status`,"
        " events.jsonl and the metrics summary, and the job runs without it; implied"
        " services use this, so a job runs where no exporter is installed).",
    )


class MetricsServerKind(ServerKind):
    """A server kind of this plugin: the ``if_missing`` rule, and no shell in a container.

    The upstream images (``quay.io/prometheus/node-exporter``, NVIDIA's dcgm-exporter) are
    shell-less, so with a ``container`` there is no preamble: the image's own binary runs
    as it is.
    """

    Options: ClassVar[type[MetricsServerOptions]] = MetricsServerOptions
    #: host binaries: the job container (the recipe's top-level ``container``) is not
    #: theirs to inherit (it has no exporter); an entry's own ``container``, or the
    #: kind's upstream image where the job runs in containers, is their image
    host_native: ClassVar[bool] = True
    #: the upstream image and the command it has (see :mod:`srt_exporters.images`)
    upstream: ClassVar[UpstreamImage | None] = None

    def ports(self, options: Any) -> dict[str, int | None]:
        """Every server of this plugin listens on one port: its ``port`` option."""
        return {"port": options.port}

    def container_fallback(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> str | None:
        # where the job runs in containers the host binary is rarely on the compute nodes
        # (it is in no job image either): the upstream image is, as the spec has it; a
        # recipe that chose the command or the binary chose the bare node
        if self.upstream is None or self.upstream.default is None:
            return None
        if spec.command is not None or getattr(options, "binary", None):
            return None
        return self.upstream.default if job_runs_in_containers(recipe) else None

    def binary(self, options: Any, ctx: InstanceContext | None = None) -> str:
        written = getattr(options, "binary", None)
        image = ctx.container if ctx is not None else None
        if not written and image and self.upstream and self.upstream.matches(image):
            return self.upstream.binary  # the image's own name for it, not a host package's
        return super().binary(options, ctx)

    def preamble(self, spec: ServiceSpec, options: Any, ctx: InstanceContext) -> str | None:
        if ctx.container is not None:
            return None  # the upstream images are shell-less: the binary runs as it is
        return super().preamble(spec, options, ctx)

    def validate(self, spec: ServiceSpec, options: Any, recipe: Recipe) -> Iterable[Problem]:
        yield from super().validate(spec, options, recipe)
        image = spec.container
        if self.upstream is None or not image or not self.upstream.matches(image):
            return
        written = getattr(options, "binary", None)
        if spec.command is not None and spec.external is None:
            where: tuple[str | int, ...] = ("command", 0)
            command = spec.command[0]
        elif written:
            where, command = ("options", "binary"), written
        else:
            return
        if self.upstream.refuses(command):
            text = refusal(image, command, self.upstream)
            yield Problem(where, f"{text}, or leave it out and srt runs {self.upstream.binary}")

    def local_options(self, spec: ServiceSpec, options: Any) -> Any:
        # the default port is srt's choice, not the recipe's: on this machine, where a
        # second job may already hold it, take one the kernel says is free (the scrape
        # targets and SRT_SERVICE_PROMETHEUS_URL follow, both come from these options)
        if "port" in spec.options or spec.command is not None:
            return options
        return options.model_copy(update={"port": free_port()})

    def may_be_unavailable(self, spec: ServiceSpec, options: Any) -> bool:
        # looked up on the node that runs it, at launch: never decided for every node on
        # the machine that plans the job (under Slurm, the batch host)
        return getattr(options, "if_missing", "fail") == "skip"
