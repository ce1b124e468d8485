"""Which module a capability or pool belongs to, and each module's part of an admission.

On a node, names are ``module/name`` (``colima/vm``, ``colima/containers``), because two
modules may both have a ``vm``. A bare name is accepted when exactly one module has it, so
the common single-module case stays short; an ambiguous or unknown name is refused with
what exists. An admission request is checked and split into one part per module before
anything is admitted, so a malformed request changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oarbank_protocol.errors import AdmissionRefused, UnknownCapability
from oarbank_protocol.lifecycle.manager import AdmissionRequest, ModuleManager


@dataclass
class ModuleWant:
    """What an admission needs from one module, in that module's own names."""

    needs: set[str] = field(default_factory=set)
    pools: dict[str, int] = field(default_factory=dict)
    needs_pools: set[str] = field(default_factory=set)

    def request(self, attempt: str, mem_gb: float = 0.0) -> AdmissionRequest:
        return AdmissionRequest(
            attempt,
            needs=frozenset(self.needs),
            pools=dict(self.pools),
            needs_pools=frozenset(self.needs_pools),
            mem_gb=mem_gb,
        )


class Router:
    """Resolves node-wide names against the modules loaded here."""

    def __init__(self, node_id: str, managers: Mapping[str, ModuleManager]) -> None:
        self.node_id = node_id
        self.managers = managers

    def module_of(self, name: str, *, pool: bool) -> tuple[str, str]:
        """(module, name within it) for a capability (``pool=False``) or a pool."""
        if "/" in name:
            module, local = name.split("/", 1)
            if module not in self.managers:
                raise UnknownCapability(
                    f"no module {module!r} on node {self.node_id!r} "
                    f"(modules: {', '.join(sorted(self.managers)) or 'none'})"
                )
            return module, local
        owners = []
        for module, manager in self.managers.items():
            if pool:
                names = {p for s in manager.services.values() for p in s.spec.pools}
            else:
                names = set(manager.services) | set(manager.probes)
            if name in names:
                owners.append(module)
        if len(owners) > 1:
            raise UnknownCapability(
                f"{name!r} is ambiguous: modules {', '.join(owners)} all have it; write "
                f"module/{name}"
            )
        if not owners:
            what = "pool" if pool else "capability"
            raise UnknownCapability(f"no module on node {self.node_id!r} has {what} {name!r}")
        return owners[0], name

    def split(self, request: Mapping[str, Any]) -> dict[str, ModuleWant]:
        """The request's ``needs``, ``pools`` and ``needs_pools``, per module."""
        parts: dict[str, ModuleWant] = {}
        for name in _strings(request.get("needs", []), "needs"):
            module, local = self.module_of(name, pool=False)
            parts.setdefault(module, ModuleWant()).needs.add(local)
        pools = request.get("pools", {})
        if not isinstance(pools, dict):
            raise AdmissionRefused("pools must be an object {pool: tokens}")
        for name, count in pools.items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise AdmissionRefused(f"pools.{name} must be a whole number >= 0")
            module, local = self.module_of(name, pool=True)
            parts.setdefault(module, ModuleWant()).pools[local] = count
        for name in _strings(request.get("needs_pools", []), "needs_pools"):
            module, local = self.module_of(name, pool=True)
            parts.setdefault(module, ModuleWant()).needs_pools.add(local)
        return parts


def _strings(value: object, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise AdmissionRefused(f"{what} must be a list of names")
    return list(value)
