"""Every running service has ``SRT_SERVICE_<KEY>_*`` variables of its own.

The benchmark learns where each service runs from ``SRT_SERVICE_<KEY>_NODES``, ``_IPS``
and ``_NODE_COUNT``, where ``<KEY>`` is the name upper-cased with every other character
than a letter or digit turned into ``_``. Names that differ only there (``a-b``, ``a_b``,
``A.B``) would share one set of variables, and the benchmark would see one service's nodes
under both names; they are refused at load time, on each entry, so both lines are shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.names import env_key

if TYPE_CHECKING:
    from srt_services.checking.rules.context import RuleContext
    from srt_services.checking.settled import Settled


def check_env_names(ctx: RuleContext, settled: list[Settled]) -> None:
    """Two services (written or implied) whose ``SRT_SERVICE_<KEY>`` is the same."""
    by_key: dict[str, dict[str, Settled]] = {}
    for s in settled:
        if s.spec.external is None:  # an external service launches nothing: no variables
            # one entry per name: a name written twice is the duplicate-name rule's
            by_key.setdefault(env_key(s.name), {}).setdefault(s.name, s)
    for key, names in by_key.items():
        if len(names) < 2:
            continue
        group = list(names.values())
        for s in group:
            others = ", ".join(_label(o) for o in group if o is not s)
            ctx.add(
                (*s.eff.label_path, "name"),
                f"gives the same SRT_SERVICE_{key}_* variables (what the benchmark is told"
                f" about each service) as {others}; rename one of them",
            )


def _label(s: Settled) -> str:
    if s.eff.path is None:
        return f"services[{s.name}] (implied by {s.eff.implied_by})"
    return f"services[{s.name}]"
