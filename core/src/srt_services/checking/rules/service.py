"""Rules of one service entry, which settle its effective values.

The kind's defaults fill what the entry leaves out (options, placement, phase,
criticality, stop grace); what is left is checked against the kind (a command it needs or
builds itself, external support, its own ``validate``) and against the rest of the entry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from srt_services.checking.rules import metrics, strings
from srt_services.checking.rules.external import check_external
from srt_services.checking.rules.implied_kinds import unprovided_kinds
from srt_services.checking.settled import Settled
from srt_services.contracts.kind import ServiceKind
from srt_services.errors import PluginError
from srt_services.recipe import placeholders as ph
from srt_services.recipe import validation
from srt_services.recipe.models import PHASES
from srt_services.recipe.problems import Problem
from srt_services.recipe.pydantic_errors import shape_problems

if TYPE_CHECKING:
    from srt_services.checking.effective import EffectiveService
    from srt_services.checking.rules.context import RuleContext
    from srt_services.checking.rules.placement import PlacementRules
    from srt_services.checking.rules.probes import ProbeRules
    from srt_services.recipe.models import ProbeBlock, ServiceSpec
    from srt_services.recipe.problems import Path


def _timing_only(spec: ServiceSpec, kind: ServiceKind) -> ProbeBlock | None:
    """A written ``readiness`` that names no probe, for a kind with a default probe: it
    tunes that probe's timing (the specification's gms entry changes only
    ``timeout_seconds``), so a kind's probe need not be restated to give it more time. A
    kind without a default probe gets the usual "give exactly one probe" error."""
    block = spec.readiness
    if block is None or block.port is not None or block.__pydantic_extra__:
        return None
    if type(kind).readiness is ServiceKind.readiness:
        return None
    return block


class ServiceRules:
    """Checks and settles service entries; all-default options are built once per kind."""

    __slots__ = ("_default_options", "_unprovided", "ctx", "placement", "probes")

    def __init__(self, ctx: RuleContext, probes: ProbeRules, placement: PlacementRules) -> None:
        self.ctx = ctx
        self.probes = probes
        self.placement = placement
        self._default_options: dict[str, Any] = {}
        self._unprovided: dict[str, str | None] | None = None

    def settle(self, eff: EffectiveService) -> Settled | None:
        """The entry's settled record; ``None`` when its kind is unknown (reported)."""
        spec = eff.spec
        at = eff.label_path
        if eff.path is not None and "type" not in spec.model_fields_set:
            if self._unprovided is None:
                self._unprovided = unprovided_kinds(self.ctx)
            if spec.name in self._unprovided:
                # it changes an implied service whose plugin is missing
                message = self._unprovided[spec.name]
                if message is not None:
                    self.ctx.add((*at, "name"), message)
                return None
        try:
            kind = self.ctx.plugins.kind(spec.type)
        except PluginError as exc:
            self.ctx.add((*at, "type"), str(exc))
            return None
        options = self._options(at, kind, spec.options)
        placement, pool, per = self.placement.settle(at, spec, kind)
        start = spec.start or kind.default_start
        if start not in PHASES:
            self.ctx.add((*at, "start"), f"kind {kind.name} has an invalid default start {start!r}")
        critical = spec.critical if spec.critical is not None else kind.default_critical
        grace = (
            spec.stop_grace_seconds
            if spec.stop_grace_seconds is not None
            else kind.default_stop_grace
        )
        self._command_and_source(at, spec, kind)
        per_worker = per == "worker"
        strings.service(self.ctx, at, spec, ph.ALL if per_worker else ph.COMMON)
        timing = _timing_only(spec, kind)
        if timing is not None:
            readiness = None
        else:
            readiness = self.probes.bind((*at, "readiness"), spec.readiness, None, per_worker)
        liveness = self.probes.bind((*at, "liveness"), spec.liveness, None, per_worker)
        metrics.endpoints(self.ctx, at, spec.metrics, ph.ALL if per_worker else ph.COMMON)
        self._lifecycle(at, spec, critical)
        if options is not None and self.ctx.origin is None:  # a kind may look at other entries
            for p in kind.validate(spec, options, self.ctx.recipe) or ():
                self.ctx.problems.append(Problem((*at, *p.path), p.message, p.warning))
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
            readiness=readiness,
            liveness=liveness,
            readiness_timing=timing,
        )

    def _options(self, at: Path, kind: ServiceKind, written: dict[str, Any]) -> Any:
        """The kind's options model, or ``None`` after reporting why the written ones are
        invalid. The all-defaults one is built once per kind and shared (most services of a
        large recipe write no options)."""
        try:
            if written:
                return validation.validate(kind.Options, written)
            found = self._default_options.get(kind.name)
            if found is None:
                found = self._default_options[kind.name] = validation.validate(kind.Options, {})
            return found
        except ValidationError as exc:
            found_problems = shape_problems(exc, kind.Options, written, (*at, "options"))
            self.ctx.problems.count_more(found_problems.more_errors)
            for p in found_problems:
                msg = p.message
                if msg.startswith("unknown key"):
                    msg = (
                        f"type {kind.name!r} does not understand this option"
                        + msg[len("unknown key") :]
                    )
                self.ctx.problems.append(Problem(p.path, msg))
            return None

    def _command_and_source(self, at: Path, spec: ServiceSpec, kind: ServiceKind) -> None:
        """A command where the kind needs one and none where it builds its own; a source
        and its build command come together; an external entry launches nothing."""
        if kind.requires_command and spec.command is None and spec.external is None:
            self.ctx.add((*at, "command"), f"is required for type {kind.name!r}")
        if kind.forbids_command and spec.command is not None:
            self.ctx.add(
                (*at, "command"), f"type {kind.name!r} builds its own command; use args or options"
            )
        if spec.external is not None:
            check_external(self.ctx, at, spec, kind)
        if spec.source is not None and spec.build_command is None:
            self.ctx.add(
                (*at, "source"),
                "is cloned but nothing builds it: add build_command (or drop source)",
                warning=True,
            )
        if spec.build_command is not None and spec.source is None:
            self.ctx.add((*at, "build_command"), "needs a source to build")
        if spec.source is None and "build_scope" in spec.model_fields_set:
            self.ctx.add((*at, "build_scope"), "needs a source to build")

    def _lifecycle(self, at: Path, spec: ServiceSpec, critical: bool) -> None:
        """A terminal service needs a process; critical and terminal ones never restart."""
        if spec.terminal and spec.external is not None:
            self.ctx.add(
                (*at, "terminal"),
                "needs a process to wait for; an external service launches nothing",
            )
        if spec.restart is not None and (critical or spec.terminal) and spec.restart.policy != "no":
            self.ctx.add(
                (*at, "restart"),
                "critical and terminal services are never restarted (a critical exit ends the job);"
                " drop restart or set critical: false",
            )
