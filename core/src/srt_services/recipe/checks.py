"""Validation that needs the plugin set: kinds, options, probes, placements, cross-entry rules.

Runs after the pydantic models accepted the recipe's shape. Every rule appends a
:class:`Problem` instead of raising, so one run reports everything that is wrong. It also
settles each service's effective values (kind, options, placement, phase, criticality) so
the planner never re-derives them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import get_close_matches
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from pydantic import ValidationError

from srt_services.errors import PluginError
from srt_services.names import DANGEROUS_ENV
from srt_services.recipe import placeholders as ph
from srt_services.recipe.effective import EffectiveService, merge
from srt_services.recipe.models import (
    PHASES,
    ProbeBlock,
    ProcessSpec,
    Recipe,
    RoleSpec,
    ServiceSpec,
)
from srt_services.recipe.ordering import after_problems
from srt_services.recipe.problems import Path, Problem
from srt_services.recipe.pydantic_errors import problems_from

if TYPE_CHECKING:
    from srt_services.extend.expansion import Expansion
    from srt_services.extend.kind import ServiceKind
    from srt_services.extend.placement import Placement
    from srt_services.extend.probe import Probe
    from srt_services.plugins.manager import PluginSet

_SRUN_KEY = re.compile(r"^[a-z][a-z0-9-]*$")
PROBE_WORDS = "port, tcp, http, log or file"


@dataclass(slots=True)
class Settled:
    """A service with everything decided: what the planner consumes."""

    eff: EffectiveService
    kind: ServiceKind
    options: Any
    placement: str
    pool: str | None
    per: str
    start: str
    critical: bool
    stop_grace: float
    #: ``eff.spec`` and its name, as fields: the planner reads them a dozen times per service
    spec: ServiceSpec
    name: str


class CachedPlugins:
    """The facade's lookups memoised for one check or plan run.

    A 10,000-service recipe asks for the same kind, probe, placement and expansion tens of
    thousands of times; the plugin set cannot change during one run, so each answer is kept.
    Anything else is passed through to the :class:`PluginSet`.
    """

    def __init__(self, plugins: PluginSet) -> None:
        self.plugins = plugins
        self._has: dict[tuple[str, str], bool] = {}
        self._kinds: dict[str, Any] = {}
        self._probes: dict[str, Any] = {}
        self._placements: dict[str, Any] = {}
        self._expansions: dict[str, Any] = {}

    def has(self, capability: str, name: str) -> bool:
        key = (capability, name)
        found = self._has.get(key)
        if found is None:
            found = self._has[key] = self.plugins.has(capability, name)
        return found

    # One dict per capability and a hit returned straight from it: these run several times
    # per service, so each level of indirection shows in a large recipe's check time.

    def kind(self, name: str) -> ServiceKind:
        found = self._kinds.get(name)
        if found is None:
            found = self._kinds[name] = self.plugins.kind(name)  # raises for an unknown name
        return found

    def probe(self, name: str) -> Probe:
        found = self._probes.get(name)
        if found is None:
            found = self._probes[name] = self.plugins.probe(name)
        return found

    def placement(self, name: str) -> Placement:
        found = self._placements.get(name)
        if found is None:
            found = self._placements[name] = self.plugins.placement(name)
        return found

    def expansion(self, name: str) -> Expansion:
        found = self._expansions.get(name)
        if found is None:
            found = self._expansions[name] = self.plugins.expansion(name)
        return found

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.plugins, attr)


@dataclass(slots=True)
class CheckResult:
    services: list[Settled] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: id(readiness/liveness block) -> (probe, validated config). A side table rather
    #: than pydantic private attributes, which cost microseconds on every model instance.
    probes: dict[int, tuple[Probe, Any]] = field(default_factory=dict)


class _Checker:
    def __init__(self, recipe: Recipe, plugins: PluginSet, origin: list[int] | None = None) -> None:
        self.recipe = recipe
        #: Set for a check beside shape errors (see :func:`check`): the position in the
        #: document of each entry of ``recipe.services``, the others having been left out.
        self.origin = origin
        self.plugins: Any = CachedPlugins(plugins)
        self.problems: list[Problem] = []
        self.probes: dict[int, tuple[Probe, Any]] = {}
        self._configs: dict[Any, Any] = {}
        self._default_options: dict[str, Any] = {}
        self._placed: dict[Any, tuple[str, str]] = {}

    def add(self, path: Path, message: str, warning: bool = False) -> None:
        self.problems.append(Problem(tuple(path), message, warning))

    # ------------------------------------------------------------------ job

    def job(self) -> None:
        r = self.recipe
        ftype = r.frontend_type
        if ftype == "none":
            if r.roles:
                self.add(
                    ("frontend", "type") if r.frontend else ("roles",),
                    "engine workers need a frontend (frontend.type dynamo, sglang or vllm);"
                    " `none` is only for jobs without roles",
                )
        elif r.frontend is not None:
            if r.frontend.command is None:
                self.add(("frontend", "command"), f"is required for frontend.type {ftype}")
            self.process(("frontend",), r.frontend, allowed=ph.COMMON)
            self.probe_block(
                ("frontend", "readiness"), r.frontend.readiness, r.frontend.port, False
            )
        if ftype == "dynamo" and not self.plugins.has("kind", "etcd"):
            self.add(
                ("frontend", "type"),
                "frontend.type dynamo needs the etcd service kind: " + self._why_missing("etcd"),
            )
        nats_planes = [
            f"dynamo.{k}"
            for k in ("request_plane", "event_plane")
            if getattr(r.dynamo, k) == "nats"
        ]
        if nats_planes and not self.plugins.has("kind", "nats"):
            verb = "needs" if len(nats_planes) == 1 else "need"
            self.add(
                ("dynamo",),
                f"{' and '.join(nats_planes)} {verb} the nats service kind: "
                + self._why_missing("nats"),
            )
        b = r.benchmark
        if b.type == "command" and b.command is None:
            self.add(("benchmark", "command"), "is required for benchmark.type command")
        if b.type == "manual" and b.command is not None:
            self.add(
                ("benchmark", "type"),
                "is manual, so benchmark.command would never run; set type: command",
            )
        self.process(("benchmark",), b, allowed=ph.COMMON)
        for role, spec in r.roles.items():
            self.role(role, spec)

    def role(self, role: str, spec: RoleSpec) -> None:
        where: Path = ("roles", role)
        if spec.command is None:
            self.add((*where, "command"), "is required")
        gpn = self.recipe.resources.gpus_per_node
        g = spec.gpus_per_worker or gpn
        if g > gpn:
            if g % gpn:
                self.add(
                    (*where, "gpus_per_worker"),
                    f"a worker wider than a node must use whole nodes: {g} is not a multiple of"
                    f" resources.gpus_per_node ({gpn})",
                )
            elif spec.nodes is not None and spec.nodes != spec.workers * (g // gpn):
                self.add(
                    (*where, "nodes"),
                    f"{spec.workers} worker(s) of {g} GPUs need exactly"
                    f" {spec.workers * (g // gpn)} node(s) of {gpn} GPUs; got {spec.nodes}",
                )
        elif spec.nodes is not None:
            per_node = gpn // g
            needed = -(-spec.workers // per_node)
            if spec.nodes < needed:
                self.add(
                    (*where, "nodes"),
                    f"{spec.workers} worker(s) of {g} GPUs need at least {needed} node(s) of"
                    f" {gpn} GPUs; got {spec.nodes}",
                )
            elif spec.nodes > spec.workers:
                self.add(
                    (*where, "nodes"),
                    f"{spec.nodes} nodes for {spec.workers} worker(s) would leave nodes idle",
                )
        self.process(where, spec, allowed=ph.ALL)
        self.probe_block((*where, "readiness"), spec.readiness, spec.port, False)

    def process(self, where: Path, spec: ProcessSpec, allowed: frozenset[str]) -> None:
        self.strings(where, "command", spec.command, allowed)
        self.strings(where, "args", spec.args, allowed)
        self.env(where, spec.env, allowed)
        if spec.preamble:
            self.text((*where, "preamble"), spec.preamble, allowed)
        if spec.container:
            self.text((*where, "container"), spec.container, allowed)

    def _why_missing(self, kind: str) -> str:
        """Why ``kind`` is unavailable: not installed, or installed but blocked/incompatible
        (the plugin set's own message names the plugin and the rule)."""
        try:
            self.plugins.kind(kind)
        except PluginError as exc:
            text = str(exc)
            if "comes from plugin" in text:
                return text
        return f"install srt-{kind}"

    # ------------------------------------------------------------------ shared pieces

    def text(self, path: Path, value: str, allowed: frozenset[str]) -> None:
        for name in ph.unknown_in(value, allowed):
            if name in ph.WORKER:
                self.add(
                    path,
                    f"{{{name}}} is only known to instances attached to a worker"
                    " (roles and placement.per: worker)",
                )
            else:
                self.add(
                    path,
                    f"unknown placeholder {{{name}}}{ph.suggestion(name, allowed)}; write"
                    f" {{{{{name}}}}} for a literal {{{name}}}",
                )

    def strings(
        self, where: Path, key: str, values: list[str] | None, allowed: frozenset[str]
    ) -> None:
        if not values or "{" not in "".join(values):  # most words hold no placeholder
            return
        unknown_in = ph.unknown_in
        for i, value in enumerate(values):
            if "{" in value and unknown_in(value, allowed):  # cached per distinct text
                self.text((*where, key, i), value, allowed)

    def env(self, where: Path, env: dict[str, str], allowed: frozenset[str]) -> None:
        unknown_in = ph.unknown_in
        for key, value in env.items():
            if key.startswith("SRT_"):
                self.add((*where, "env", key), "names starting with SRT_ are reserved for srt")
            elif key in DANGEROUS_ENV:
                self.add(
                    (*where, "env", key),
                    f"{key} changes how every program of the service is loaded, so srt refuses"
                    " it in env; export it in `preamble` if you really mean it",
                )
            if unknown_in(value, allowed):
                self.text((*where, "env", key), value, allowed)

    def probe_block(
        self, path: Path, block: ProbeBlock | None, default_port: int | None, per_worker: bool
    ) -> None:
        if block is None:
            return
        written = block.__pydantic_extra__ or {}
        unknown = [n for n in written if not self.plugins.has("probe", n)]
        if unknown:
            probes = sorted(self.plugins.probes())
            settings = [f for f in type(block).model_fields if f != "port"]
            for name in unknown:
                close = get_close_matches(name, ["port", *probes, *settings], n=1)
                if close and close[0] in settings:
                    self.add((*path, name), f"unknown key; did you mean {close[0]!r}?")
                    continue
                hint = f"; did you mean {close[0]!r}?" if close else ""
                self.add(
                    (*path, name),
                    f"unknown probe {name!r}{hint} (known: port, {', '.join(probes)})",
                )
            return
        if block.port is not None and "tcp" in written:
            self.add(path, "give either port (shorthand) or tcp, not both")
            return
        # the usual block names one probe and no ``port`` shorthand: no dict to build
        entries = written if block.port is None else block.probe_entries
        if len(entries) != 1:
            got = " and ".join(sorted(entries)) if entries else "none"
            self.add(path, f"give exactly one probe ({PROBE_WORDS}), got {got}")
            return
        ((name, raw),) = entries.items()
        key_path = (*path, "port") if block.port is not None else (*path, name)
        probe = self.plugins.probe(name)
        if not isinstance(raw, dict):
            self.add(key_path, f"must be a mapping of {name} settings, got {type(raw).__name__}")
            return
        config = self._probe_config(probe, name, raw, path)
        if config is None:
            return
        for rel, message in probe.problems(config, default_port):
            self.add((*key_path, *rel) if block.port is None else key_path, message)
        if per_worker and not probe.instance_scoped:
            self.add(
                path,
                "per-worker instances share their node's ports, so readiness must be a probe"
                f" of the instance itself (log or file), not {name}",
            )
        # the one probe setting placeholders reach (``vars``: a missing attribute on a
        # pydantic model goes through its slow ``__getattr__``)
        value = vars(config).get("path")
        if isinstance(value, str) and "{" in value:
            self.text((*path, name, "path"), value, ph.ALL if per_worker else ph.COMMON)
        self.probes[id(block)] = (probe, config)

    def _probe_config(self, probe: Probe, name: str, raw: dict[str, Any], path: Path) -> Any:
        """The probe's validated config, or ``None`` after reporting why it is invalid.

        Generated recipes repeat the same probe settings (``{port: 8080}``) across thousands
        of services, so a valid config is validated once and shared; configs are never
        mutated (planning copies what it needs into the plan).
        """
        try:
            # types in the key: 8080.0 and True equal 8080 and 1, but strict mode refuses them
            key: Any = (name, *((k, type(v), v) for k, v in raw.items()))
            found = self._configs.get(key)
        except TypeError:  # an unhashable value (a list): validate it every time
            key, found = None, None
        if found is not None:
            return found
        try:
            config = probe.Config.model_validate(raw)
        except ValidationError as exc:
            self.problems.extend(problems_from(exc, probe.Config, (*path, name)))
            return None
        if key is not None:
            self._configs[key] = config
        return config

    # ------------------------------------------------------------------ services

    def services(self) -> list[Settled]:
        declared = self.recipe.services
        origin = self.origin
        seen: dict[str, int] = {}
        for i, spec in enumerate(declared):
            at = origin[i] if origin is not None else i
            if spec.name in seen:
                self.add(
                    ("services", at, "name"),
                    f"duplicate service name {spec.name!r} (also services[{seen[spec.name]}])",
                )
            else:
                seen[spec.name] = at
        implied = self.implied()
        effective = merge(declared, implied)
        if origin is not None:
            # only the written entries, at their place in the document: an implied service
            # may differ once the left-out entries (which can override it) are fixed
            effective = [e for e in effective if e.path is not None]
            for e in effective:
                _, index = cast("tuple[str, int]", e.path)
                e.path = ("services", origin[index])
        settled: list[Settled] = []
        for eff in effective:
            s = self.service(eff)
            if s is not None:
                settled.append(s)
        if origin is None:  # cross-service rules need every entry
            self.cross(settled)
        return settled

    def implied(self) -> list[tuple[str, Any, ServiceSpec]]:
        try:
            items = self.plugins.implied_services(self.recipe)
        except PluginError as exc:
            self.add(("services",), str(exc))
            return []
        out = []
        for item in items:
            # pluggy's call does not say which implementation returned what; the reason
            # the plugin wrote is what tells the user where it came from
            owner = self.plugins.owner("kind", str(item.entry.get("type", "generic"))) or ""
            try:
                spec = ServiceSpec.model_validate(item.entry)
            except ValidationError as exc:
                detail = "; ".join(p.message for p in problems_from(exc, ServiceSpec))
                self.add(
                    ("services",),
                    f"an implied service {item.entry.get('name')!r} (implied by: {item.reason})"
                    f" is invalid: {detail}",
                )
                continue
            out.append((owner, item, spec))
        return out

    def service(self, eff: EffectiveService) -> Settled | None:
        spec = eff.spec
        at = eff.label_path
        try:
            kind = self.plugins.kind(spec.type)
        except PluginError as exc:
            self.add((*at, "type"), str(exc))
            return None
        try:
            options = self._options(kind, spec.options)
        except ValidationError as exc:
            for p in problems_from(exc, kind.Options, (*at, "options")):
                msg = p.message
                if msg.startswith("unknown key"):
                    msg = (
                        f"type {kind.name!r} does not understand this option"
                        + msg[len("unknown key") :]
                    )
                self.problems.append(Problem(p.path, msg))
            options = None

        placement, pool, per = self.placement(at, spec, kind)
        start = spec.start or kind.default_start
        if start not in PHASES:
            self.add((*at, "start"), f"kind {kind.name} has an invalid default start {start!r}")
        critical = spec.critical if spec.critical is not None else kind.default_critical
        grace = (
            spec.stop_grace_seconds
            if spec.stop_grace_seconds is not None
            else kind.default_stop_grace
        )

        if kind.requires_command and spec.command is None and spec.external is None:
            self.add((*at, "command"), f"is required for type {kind.name!r}")
        if kind.forbids_command and spec.command is not None:
            self.add(
                (*at, "command"), f"type {kind.name!r} builds its own command; use args or options"
            )
        if spec.external is not None:
            self.external(at, spec, kind)
        if spec.source is not None and spec.build_command is None:
            self.add(
                (*at, "source"),
                "is cloned but nothing builds it: add build_command (or drop source)",
                warning=True,
            )
        if spec.build_command is not None and spec.source is None:
            self.add((*at, "build_command"), "needs a source to build")
        per_worker = per == "worker"
        allowed = ph.ALL if per_worker else ph.COMMON
        self.strings(at, "command", spec.command, allowed)
        if spec.args:
            self.strings(at, "args", spec.args, allowed)
        if spec.build_command:
            self.strings(at, "build_command", spec.build_command, allowed)
        if spec.env:
            self.env(at, spec.env, allowed)
        if spec.preamble:
            self.text((*at, "preamble"), spec.preamble, allowed)
        if spec.container:
            self.text((*at, "container"), spec.container, allowed)
        for key, value in spec.srun_options.items():
            if not _SRUN_KEY.match(key):
                self.add(
                    (*at, "srun_options", key),
                    "srun option names are lower-case words with '-' (no leading dashes)",
                )
            self.text((*at, "srun_options", key), value, allowed)
        if spec.readiness is not None:
            self.probe_block((*at, "readiness"), spec.readiness, None, per_worker)
        if spec.liveness is not None:
            self.probe_block((*at, "liveness"), spec.liveness, None, per_worker)
        if len(spec.metrics) > 1:
            names = [m.name for m in spec.metrics]
            if None in names or len(set(names)) != len(names):
                self.add(
                    (*at, "metrics"),
                    f"declares {len(names)} endpoints; give each a distinct name",
                )
        if spec.terminal and spec.external is not None:
            self.add(
                (*at, "terminal"),
                "needs a process to wait for; an external service launches nothing",
            )
        if spec.restart is not None and (critical or spec.terminal) and spec.restart.policy != "no":
            self.add(
                (*at, "restart"),
                "critical and terminal services are never restarted (a critical exit ends the job);"
                " drop restart or set critical: false",
            )
        if options is not None and self.origin is None:  # a kind may look at other entries
            for p in kind.validate(spec, options, self.recipe) or ():
                self.problems.append(Problem((*at, *p.path), p.message, p.warning))
        return Settled(
            eff=eff,
            kind=kind,
            options=options,
            placement=placement,
            pool=pool,
            per=per,
            start=start,
            critical=critical,
            stop_grace=grace,
            spec=spec,
            name=spec.name,
        )

    def _options(self, kind: ServiceKind, written: dict[str, Any]) -> Any:
        """The kind's options model; the all-defaults one is built once per kind and shared
        (most services of a large recipe write no options)."""
        if written:
            return kind.Options.model_validate(written)
        found = self._default_options.get(kind.name)
        if found is None:
            found = self._default_options[kind.name] = kind.Options.model_validate({})
        return found

    def placement(
        self, at: Path, spec: ServiceSpec, kind: ServiceKind
    ) -> tuple[str, str | None, str]:
        """(placement, pool, per) of a service, after checking the combination.

        The answer depends only on the written node/per, whether a pool or ``nodes`` is
        given, and the kind; a combination that passed is remembered, so the thousands of
        services of a generated recipe that share one pay a dictionary lookup.
        """
        p = spec.placement
        key = (
            kind.name,
            p.node if p is not None else None,
            p.per if p is not None else None,
            p is not None and p.pool is not None,
            spec.nodes is not None,
        )
        found = self._placed.get(key)
        if found is not None:
            placement, per = found
            if placement == "pool":
                return placement, p.pool, per  # type: ignore[union-attr]
            return placement, spec.name if spec.nodes is not None else None, per
        before = len(self.problems)
        result = self._placement(at, spec, kind)
        if len(self.problems) == before:
            self._placed[key] = (result[0], result[2])
        return result

    def _placement(
        self, at: Path, spec: ServiceSpec, kind: ServiceKind
    ) -> tuple[str, str | None, str]:
        p = spec.placement
        per = p.per if p is not None and p.per is not None else kind.default_per
        pool: str | None = None
        if p is not None and p.pool is not None:
            placement = "pool"
            pool = p.pool
            if spec.nodes is not None:
                self.add(
                    (*at, "placement", "pool"),
                    "a service with nodes owns its own pool; drop placement.pool",
                )
        elif spec.nodes is not None:
            placement = p.node if p is not None and p.node is not None else "workers"
            pool = spec.name
            if placement != "workers":
                self.add(
                    (*at, "placement", "node"),
                    f"a service with nodes runs on the pool it owns, so placement.node must be"
                    f" workers (or omitted); got {placement!r}",
                )
        else:
            placement = p.node if p is not None and p.node is not None else kind.default_placement
        if p is not None and p.node is not None:
            node_path = (*at, "placement", "node")
        elif spec.nodes is not None:
            node_path = (*at, "nodes")
        else:
            node_path = (*at, "type")
        if placement != "pool" and not self.plugins.has("placement", placement):
            known = ", ".join(n for n in sorted(self.plugins.placements()) if n != "pool")
            self.add(node_path, f"must be one of {known}; got {placement!r}")
        elif kind.allowed_placements is not None and placement not in kind.allowed_placements:
            allowed = ", ".join(sorted(kind.allowed_placements))
            self.add(
                node_path, f"type {kind.name!r} must be placed on {allowed}; got {placement!r}"
            )
        if placement == "dedicated" and not kind.supports_dedicated:
            self.add(
                node_path,
                f"dedicated is only for the infra kinds that support it, not type {kind.name!r}",
            )
        per_path = (
            (*at, "placement", "per") if p is not None and p.per is not None else (*at, "type")
        )
        if not self.plugins.has("expansion", per):
            known = ", ".join(sorted(self.plugins.expansions()))
            self.add(per_path, f"must be one of {known}; got {per!r}")
        else:
            expansion = self.plugins.expansion(per)
            if expansion.needs_workers:
                if spec.nodes is not None or placement == "pool":
                    self.add(per_path, f"per: {per} attaches to engine workers, not to a pool")
                elif self.plugins.has("placement", placement):
                    roles = self.plugins.placement(placement).worker_roles
                    if roles is None:
                        self.add(
                            per_path,
                            f"per: {per} needs a placement that selects workers (prefill, decode,"
                            f" agg or workers); got {placement!r}",
                        )
        return placement, pool, per

    def external(self, at: Path, spec: ServiceSpec, kind: ServiceKind) -> None:
        if not kind.supports_external:
            self.add((*at, "external"), f"type {kind.name!r} does not support external instances")
            return
        if kind.external_schemes:
            for message in external_url_problems(spec.external or "", kind.external_schemes):
                self.add((*at, "external"), message)
        for key in ("command", "args", "source", "build_command", "nodes", "readiness"):
            if getattr(spec, key):
                self.add((*at, key), "has no effect with external (nothing is launched); drop it")
        for key in sorted(spec.options):
            # a warning, not an error: options often stay in a recipe switched to external
            self.add(
                (*at, "options", key),
                "has no effect with external (nothing is launched); drop it",
                warning=True,
            )

    def cross(self, settled: list[Settled]) -> None:
        infra = [
            s
            for s in settled
            if s.kind.shares_infra_node and s.spec.external is None and s.eff.path is not None
        ]
        flags = {s.placement == "dedicated" for s in infra}
        if len(flags) > 1:
            ded = [s.name for s in infra if s.placement == "dedicated"]
            other = [s.name for s in infra if s.placement != "dedicated"]
            for s in infra:
                if s.placement != "dedicated":
                    self.add(
                        (*s.eff.label_path, "placement"),
                        f"services {', '.join(ded)} and {', '.join(other)} must agree on"
                        " placement.node: dedicated (they share the infra node)",
                    )
        owners = {s.name for s in settled if s.spec.nodes is not None}
        for s in settled:
            if s.placement == "pool" and s.pool not in owners:
                listed = ", ".join(sorted(owners)) or "none"
                self.add(
                    (*s.eff.label_path, "placement", "pool"),
                    f"{s.pool!r} names no service that declares nodes (pools: {listed})",
                )
        terminal = [s for s in settled if s.spec.terminal]
        if terminal and self.recipe.benchmark.type != "manual":
            for s in terminal:
                self.add(
                    (*s.eff.label_path, "terminal"),
                    "ends the job when the service exits, so the job cannot also run"
                    f" benchmark.type: {self.recipe.benchmark.type}; drop one of them",
                )
        self.problems.extend(after_problems(self.recipe, settled))
        try:
            self.problems.extend(self.plugins.validate_recipe(self.recipe))
        except PluginError as exc:
            self.add(("services",), str(exc))


def check(recipe: Recipe, plugins: PluginSet, origin: list[int] | None = None) -> CheckResult:
    """Every plugin-aware rule of a recipe whose shape is valid.

    With ``origin``, ``recipe`` holds only the service entries whose shape passed, and
    ``origin[i]`` is where its entry ``i`` sits in the document: the rules of each entry
    then run, so that their problems are reported together with the shape errors of the
    others. Rules that need every entry (cross-service ones, a kind's ``validate``) wait
    for the full check, where a left-out entry could not make them report a false problem.
    """
    checker = _Checker(recipe, plugins, origin)
    checker.job()
    services = checker.services()
    return CheckResult(services=services, problems=checker.problems, probes=checker.probes)


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
