"""The upstream images of the exporters and the commands those images have.

A host package and an upstream image put the same program under different names: Debian's
``prometheus-node-exporter`` is ``/bin/node_exporter`` in ``quay.io/prometheus/node-exporter``,
and the upstream images are shell-less (no ``command -v`` check can run in them). So the
command follows the image: on the bare node the host binary, in a recognised upstream image
the image's own binary, and ``srt validate`` refuses a command the image is known not to
have (the service would restart-loop with no metrics and nothing else would say why).

An image is recognised by its repository's last path component (``node-exporter`` in
``quay.io/prometheus/node-exporter:v1.8.2``, and equally in an air-gapped site's mirror
``registry.site/mirror/node-exporter:v1.8.2``), whatever its registry and tag. An image
under another name (a site's own image with the Debian packages in it) is not judged: its
command is the host binary's, as on the bare node.
"""

from __future__ import annotations

from dataclasses import dataclass

from srt_services.extend import Problem, Recipe


@dataclass(frozen=True, slots=True)
class UpstreamImage:
    #: the image srt runs by default where the job runs in containers (``None``: the kind
    #: stays on the bare node by default, as the spec has process-exporter)
    default: str | None
    #: the repository names (last path component) that are this image
    names: tuple[str, ...]
    #: the command srt runs in it
    binary: str
    #: every command the image is known to have for this server (absolute and on PATH)
    has: tuple[str, ...]

    def matches(self, image: str) -> bool:
        return repository_name(image) in self.names

    def refuses(self, command: str) -> bool:
        """Whether ``command`` is known not to be in the image: a path or name other than
        the ones it has. A placeholder (rendered later) is not judged."""
        return "{" not in command and command not in self.has


def repository_name(image: str) -> str:
    """``node-exporter`` of ``quay.io/prometheus/node-exporter:v1.8.2@sha256:...``: the last
    path component without tag or digest (a registry's ``host:port`` is in an earlier one)."""
    last = image.strip().split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[0].lower()


def job_runs_in_containers(recipe: Recipe) -> bool:
    """The job has images (so the cluster has pyxis): the job container, or one on the
    frontend, the benchmark or a worker role."""
    if recipe.container or recipe.benchmark.container:
        return True
    if recipe.frontend is not None and recipe.frontend.container:
        return True
    return any(role.container for role in recipe.roles.values())


NODE_IMAGE = UpstreamImage(
    default="quay.io/prometheus/node-exporter:v1.8.2",
    names=("node-exporter",),
    binary="/bin/node_exporter",
    has=("/bin/node_exporter", "node_exporter"),
)
DCGM_IMAGE = UpstreamImage(
    default="nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04",
    names=("dcgm-exporter",),
    binary="dcgm-exporter",
    has=("dcgm-exporter", "/usr/bin/dcgm-exporter"),
)
PROCESS_IMAGE = UpstreamImage(
    default=None,
    names=("process-exporter",),
    binary="/bin/process-exporter",
    has=("/bin/process-exporter", "process-exporter"),
)
PROMETHEUS_IMAGE = UpstreamImage(
    default="quay.io/prometheus/prometheus:v2.53.2",
    names=("prometheus",),
    binary="/bin/prometheus",
    has=("/bin/prometheus", "prometheus"),
)

UPSTREAM_IMAGES: tuple[UpstreamImage, ...] = (
    NODE_IMAGE,
    DCGM_IMAGE,
    PROCESS_IMAGE,
    PROMETHEUS_IMAGE,
)


def refusal(image: str, command: str, upstream: UpstreamImage) -> str:
    """Why ``command`` cannot run in ``image`` (an image of ``upstream``)."""
    has = " or ".join(f"`{c}`" for c in upstream.has)
    return (
        f"{command!r} is not in the image {image} ({upstream.names[0]} has {has}): the"
        f" service would fail at every start; write `{upstream.has[0]}`"
    )


def generic_image_problems(recipe: Recipe) -> list[Problem]:
    """A ``generic`` service that runs an upstream exporter image with a command the image
    lacks (a recipe moved from the host packages to the image, keeping the Debian name)."""
    out: list[Problem] = []
    for i, spec in enumerate(recipe.services):
        if spec.type != "generic" or not spec.container or not spec.command:
            continue
        for upstream in UPSTREAM_IMAGES:
            if upstream.matches(spec.container) and upstream.refuses(spec.command[0]):
                where = ("services", i, "command", 0)
                out.append(Problem(where, refusal(spec.container, spec.command[0], upstream)))
    return out
