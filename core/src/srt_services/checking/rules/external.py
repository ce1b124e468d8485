"""Rules of ``external`` services: ones srt points clients at but does not launch."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.contracts.kind import ServiceKind
    from srt_services.recipe.models import ServiceSpec
    from srt_services.recipe.problems import Path


def check_external(ctx: RuleContext, at: Path, spec: ServiceSpec, kind: ServiceKind) -> None:
    """The kind supports external instances, the address is valid, nothing is launched."""
    if not kind.supports_external:
        ctx.add((*at, "external"), f"type {kind.name!r} does not support external instances")
        return
    if kind.external_schemes:
        for message in external_url_problems(spec.external or "", kind.external_schemes):
            ctx.add((*at, "external"), message)
    for key in ("command", "args", "source", "build_command", "nodes", "readiness"):
        if getattr(spec, key):
            ctx.add((*at, key), "has no effect with external (nothing is launched); drop it")
    for key in sorted(set(spec.options) - kind.external_options):
        # a warning, not an error: options often stay in a recipe switched to external
        ctx.add(
            (*at, "options", key),
            "has no effect with external (nothing is launched); drop it",
            warning=True,
        )


def external_url_problems(url: str, schemes: tuple[str, ...]) -> list[str]:
    """What is wrong with an ``external`` address: one URL or a comma-separated list.

    Clients of a replicated service (etcd, NATS) take every member, so each endpoint is
    checked; a path is refused because clients append their own, and a bad port would only
    surface as a connection error inside a worker much later.
    """
    wanted = " or ".join(f"{s}://" for s in schemes)
    out: list[str] = []
    for i, part in enumerate(url.split(",")):
        endpoint = part.strip()
        try:
            parts = urlsplit(endpoint)
        except ValueError:  # an unbalanced or non-IP bracketed host
            parts = None
        if parts is None or parts.scheme not in schemes or not parts.netloc:
            if i == 0:  # shown whole: usually the value is one URL, or not a URL at all
                out.append(f"must be a {wanted}host:port URL, got {url!r}")
            else:
                out.append(f"endpoint {endpoint!r} must be a {wanted}host:port URL")
            continue
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            out.append(
                f"endpoint {endpoint!r} must be scheme://host:port only; clients add their own"
                " paths"
            )
        try:
            parts.port  # noqa: B018 - raises on a non-numeric or out-of-range port
        except ValueError:
            out.append(f"endpoint {endpoint!r} has an invalid port")
    return out
