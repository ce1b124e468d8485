"""The port ledger: every port every instance listens on, per node, checked at plan time.

Readiness ports, the ports a kind's own command binds, metrics ports, worker ports and the
frontend port all go in, so two services that would fight over a port on a node are refused
before anything starts (the original only knew readiness ports, and only at launch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from srt_services.recipe.problems import Path, Problem


@dataclass(slots=True)
class _Claim:
    owner: str
    step: str
    path: Path


@dataclass(slots=True)
class PortLedger:
    claims: dict[tuple[str, int], _Claim] = field(default_factory=dict)
    clashes: list[tuple[str, int, _Claim, _Claim]] = field(default_factory=list)

    def claim(self, node: str, port: int, owner: str, step: str, path: Path) -> None:
        key = (node, port)
        current = self.claims.get(key)
        if current is None:
            self.claims[key] = _Claim(owner, step, path)
        elif current.step != step:
            self.clashes.append((node, port, current, _Claim(owner, step, path)))

    def problems(self) -> list[Problem]:
        out = []
        for node, port, first, second in self.clashes:
            if first.owner == second.owner:
                message = (
                    f"instances {first.step} and {second.step} both listen on port {port} on"
                    f" node {node}; give each instance its own port (e.g. from"
                    " {worker_port} or {index})"
                )
            else:
                message = (
                    f"{first.owner} and {second.owner} both listen on port {port} on node {node};"
                    " give them disjoint placements or ports"
                )
            out.append(Problem(second.path, message))
        return out

    def entries(self) -> list[dict[str, Any]]:
        return [
            {"node": node, "port": port, "owner": c.owner, "step": c.step}
            for (node, port), c in sorted(self.claims.items())
        ]
