"""The services a recipe really runs: implied ones merged with declared ones.

Order (which is launch order within a phase): implied services first, in the order plugins
return them, then declared services in declaration order. A declared entry with an implied
entry's name takes its place (and position), keeping the implied type unless it names one;
``enabled: false`` on it drops it. An implied
entry may also step aside when a service of a given type is declared under any name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from srt_services.recipe.problems import Path

if TYPE_CHECKING:
    from srt_services.contracts.implied import ImpliedService
    from srt_services.recipe.models import ServiceSpec


@dataclass(slots=True)
class EffectiveService:
    spec: ServiceSpec
    #: Where the entry is in the document (``("services", i)``), or ``None`` when implied.
    path: Path | None
    implied_by: str | None = None
    #: A declared entry that replaced an implied one keeps the implied reason here.
    replaces_implied: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def label_path(self) -> Path:
        return self.path if self.path is not None else ("services", self.spec.name)


def merge(
    declared: list[ServiceSpec],
    implied: list[tuple[ImpliedService, ServiceSpec]],
) -> list[EffectiveService]:
    """``implied`` holds (ImpliedService, validated spec) pairs, in launch order."""
    by_name = {s.name: (i, s) for i, s in enumerate(declared)}
    declared_types = {s.type for s in declared if s.enabled}
    used: set[int] = set()
    out: list[EffectiveService] = []
    seen: set[str] = set()
    for item, spec in implied:
        if spec.name in seen:
            continue
        seen.add(spec.name)
        if spec.name in by_name:
            idx, override = by_name[spec.name]
            used.add(idx)
            if "type" not in override.model_fields_set and override.type != spec.type:
                # `- {name: etcd, placement: ...}` changes the implied etcd; it does not mean
                # "replace etcd with a generic service"
                override = override.model_copy(update={"type": spec.type})
            if override.enabled:
                out.append(
                    EffectiveService(override, ("services", idx), replaces_implied=item.reason)
                )
            continue
        if any(t in declared_types for t in item.unless_type_declared):
            continue
        if spec.enabled:
            out.append(EffectiveService(spec, None, implied_by=item.reason))
    for idx, spec in enumerate(declared):
        if idx in used or not spec.enabled:
            continue
        out.append(EffectiveService(spec, ("services", idx)))
    return out
