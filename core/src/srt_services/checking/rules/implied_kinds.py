"""No implied service is ever dropped in silence: the settings that imply one, and whether
a plugin is there to run it.

Plugins imply services through ``srt_implied_services``, so a plugin that is not installed
(or that the site does not allow) implies nothing, and the job would run without the
etcd, LMCache server or GPU Memory Service the recipe asks for. Core therefore keeps its
own table of which setting implies which kind, independent of what is installed, and
refuses such a recipe at the setting's line, the way an explicit ``type:`` no plugin
provides is refused: naming the kind, the plugin, how to install it and how to switch the
service off instead.

A kind is needed unless the recipe switches it off (an entry of the kind's name with
``enabled: false``) or replaces it (a declared entry of that type, which is checked as
any typed entry is, or an entry of that name with a type of its own).

The one exception is the default of ``observability.metrics``: when the recipe does not
write it and the exporters are not installed, the job runs without them and a warning
says so; writing ``metrics: true`` is a request, refused like the others.

The connector rules live here too: a connector names what the workers load, and
``lmcache-mp`` is the one that implies a service.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services.plugins.availability import kind_unavailable
from srt_services.plugins.manager import FIRST_PARTY_KINDS

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.recipe.models import Recipe
    from srt_services.recipe.problems import Path

#: What metrics on implies (srt-exporters): the exporters every node runs and the scraper.
METRICS_KINDS = ("node-exporter", "dcgm-exporter", "process-exporter", "prometheus")
#: Connectors that imply a service, and its kind.
CONNECTOR_KINDS = {"lmcache-mp": "lmcache-server"}


@dataclass(frozen=True, slots=True)
class ImplyingSetting:
    """A row of the recipe reference's table of settings that imply services."""

    setting: str
    kinds: tuple[str, ...]
    #: How to run without the services.
    off: str


#: What the recipe reference lists (``docs_gen``); :func:`implications` reads the recipe
#: itself, and a test keeps the two in step.
IMPLYING_SETTINGS: tuple[ImplyingSetting, ...] = (
    ImplyingSetting(
        "`frontend.type: dynamo` (also the type of a frontend that writes none)",
        ("etcd",),
        "a services entry `{name: etcd, enabled: false}`",
    ),
    ImplyingSetting(
        "`dynamo.request_plane: nats`, `dynamo.event_plane: nats`",
        ("nats",),
        "the default planes (`tcp`, `zmq`)",
    ),
    ImplyingSetting(
        "`connector: lmcache-mp` on `engine` or a role (vLLM)",
        ("lmcache-server",),
        "a services entry `{name: lmcache-server, enabled: false}`",
    ),
    ImplyingSetting("`engine.failover: true`", ("gms",), "`engine.failover: false`"),
    ImplyingSetting(
        "`observability.metrics: true` (the default)",
        METRICS_KINDS,
        "`observability.metrics: false`. Left at its default without the plugin, the job runs"
        " without them and srt warns",
    ),
)


@dataclass(frozen=True, slots=True)
class Implication:
    """One setting of a recipe that implies services of ``kinds``."""

    #: How the message, shown after the setting's path, names its value (``true``).
    value: str
    #: Where the setting is (or would be) in the document.
    path: Path
    kinds: tuple[str, ...]
    #: How to run without the services, for the message (``set engine.failover: false``).
    off: str
    #: The recipe wrote the setting (``False`` only for the default of metrics).
    written: bool = True


def implications(recipe: Recipe) -> list[Implication]:
    """Every setting of ``recipe`` that implies services, in document order."""
    out: list[Implication] = []
    if recipe.frontend_type == "dynamo":
        out.append(
            Implication(
                "dynamo"
                if recipe.frontend and "type" in recipe.frontend.model_fields_set
                else "dynamo (the default frontend type)",
                ("frontend", "type"),
                ("etcd",),
                "declare `{name: etcd, enabled: false}` under services (Dynamo then needs"
                " ETCD_ENDPOINTS from elsewhere)",
            )
        )
    for plane, default in (("request_plane", "tcp"), ("event_plane", "zmq")):
        if getattr(recipe.dynamo, plane) == "nats":
            out.append(
                Implication(
                    "nats",
                    ("dynamo", plane),
                    ("nats",),
                    f"set dynamo.{plane}: {default}",
                )
            )
    out.extend(_connectors(recipe))
    if recipe.engine.failover:
        out.append(
            Implication(
                "true",
                ("engine", "failover"),
                ("gms",),
                "set engine.failover: false",
            )
        )
    if recipe.observability.metrics:
        written = "metrics" in recipe.observability.model_fields_set
        at: Path = ("observability", "metrics")
        if not written:
            at = ("observability",) if "observability" in recipe.model_fields_set else ()
        out.append(
            Implication(
                "true",
                at,
                METRICS_KINDS,
                "set observability.metrics: false",
                written=written,
            )
        )
    return out


def _connectors(recipe: Recipe) -> list[Implication]:
    """One implication per place a service-implying connector is written that a vLLM role
    uses (the engine's, or a role's own)."""
    if recipe.engine.type != "vllm":
        return []
    out: dict[Path, Implication] = {}
    for role, spec in recipe.roles.items():
        connector = recipe.role_connector(role)
        kind = CONNECTOR_KINDS.get(connector or "")
        if kind is None:
            continue
        own = spec.connector is not None
        path: Path = ("roles", role, "connector") if own else ("engine", "connector")
        out.setdefault(
            path,
            Implication(
                str(connector),
                path,
                (kind,),
                f"declare `{{name: {kind}, enabled: false}}` under services (the workers then"
                " need a server they reach on their own)",
            ),
        )
    return list(out.values())


def check_connectors(ctx: RuleContext) -> None:
    """Connectors are vLLM's: one written for another engine would be ignored."""
    recipe = ctx.recipe
    if recipe.engine.type == "vllm":
        return
    written: list[tuple[Path, str]] = []
    if recipe.engine.connector not in (None, "none"):
        written.append((("engine", "connector"), str(recipe.engine.connector)))
    for role, spec in recipe.roles.items():
        if spec.connector not in (None, "none"):
            written.append((("roles", role, "connector"), str(spec.connector)))
    for path, connector in written:
        hint = (
            "; SGLang workers use an LMCache server through `--enable-lmcache` and a declared"
            " lmcache-server service"
            if connector.startswith("lmcache") and recipe.engine.type == "sglang"
            else ""
        )
        ctx.add(
            path,
            f"connector {connector} is a vLLM KV connector, but engine.type is"
            f" {recipe.engine.type}: remove it{hint}",
        )


def check_implied_kinds(ctx: RuleContext) -> None:
    """Every implied kind that no loadable plugin provides, at the setting that implies it."""
    check_connectors(ctx)
    for imp in implications(ctx.recipe):
        needed = [k for k in imp.kinds if not _switched_off_or_replaced(ctx.recipe, k)]
        by_plugin: dict[str, list[str]] = {}
        for kind in needed:
            by_plugin.setdefault(FIRST_PARTY_KINDS.get(kind, f"srt-{kind}"), []).append(kind)
        for dist, kinds in by_plugin.items():
            gaps = [(k, kind_unavailable(ctx.plugins, k, dist)) for k in kinds]
            missing = [(k, u) for k, u in gaps if u is not None]
            if not missing:
                continue
            names = [k for k, _ in missing]
            why = missing[0][1]
            assert why is not None
            if imp.written:
                ctx.add(
                    imp.path,
                    f"{imp.value} implies the {_words(names)} service{_s(names)}, whose"
                    f" kind{_s(names)} {dist} provides, but"
                    f" {why.plugin} {why.state}: {why.fix}, or {imp.off}",
                )
            else:
                ctx.add(
                    imp.path,
                    f"observability.metrics is on by default but {why.plugin} {why.state}: the"
                    f" job runs without exporters and Prometheus; {why.fix}, or {imp.off}",
                    warning=True,
                )


def unprovided_kinds(ctx: RuleContext) -> dict[str, str | None]:
    """The kinds the recipe's settings imply that no loadable plugin provides: kind -> what
    to tell an entry that changes it, or ``None`` when the setting's own error says it all.

    An entry named like one of them, with no type of its own, was written to change that
    implied service (``- {name: lmcache-server, options: ...}``); with the kind missing it
    must not be checked as a generic entry, which would bury the one real problem (the
    plugin) under the generic kind's complaints about a command it never needed. Under the
    default of metrics the setting only warns, but an entry that tunes Prometheus asks for
    it: that entry gets the error."""
    out: dict[str, str | None] = {}
    for imp in implications(ctx.recipe):
        for kind in imp.kinds:
            dist = FIRST_PARTY_KINDS.get(kind, f"srt-{kind}")
            why = kind_unavailable(ctx.plugins, kind, dist)
            if why is None:
                continue
            if imp.written:
                out[kind] = None
            elif kind not in out:
                out[kind] = (
                    f"changes the implied {kind} service, whose kind {dist} provides, but"
                    f" {why.plugin} {why.state}: {why.fix}"
                )
    return out


def _switched_off_or_replaced(recipe: Recipe, kind: str) -> bool:
    """An entry named like the implied service switches it off (``enabled: false``) or
    replaces it (a type of its own); an enabled entry of the kind's type replaces it and is
    checked as a typed entry."""
    for spec in recipe.services:
        if spec.name == kind and (not spec.enabled or "type" in spec.model_fields_set):
            return True
        if spec.type == kind and spec.enabled:
            return True
    return False


def _words(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " and " + names[-1]


def _s(names: list[str]) -> str:
    return "s" if len(names) > 1 else ""
