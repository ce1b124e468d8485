"""Rows describing every kind, for ``srt kinds`` and the docs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from srt_services.plugins.manager import PluginSet


def kind_rows(plugins: PluginSet) -> list[dict[str, Any]]:
    rows = []
    for name, kind in plugins.kinds().items():
        rows.append(
            {
                "type": name,
                "summary": kind.summary,
                "start": kind.default_start,
                "critical": kind.default_critical,
                "placement": kind.default_placement
                + (
                    f" (only {', '.join(sorted(kind.allowed_placements))})"
                    if kind.allowed_placements
                    else ""
                ),
                "per": kind.default_per,
                "readiness_timeout": kind.default_readiness_timeout,
                "readiness": getattr(kind, "readiness_summary", ""),
                "external": kind.supports_external,
                "dedicated": kind.supports_dedicated,
                "stop_grace": kind.default_stop_grace,
                "options": sorted(kind.Options.model_fields),
                "plugin": plugins.owner("kind", name) or "?",
            }
        )
    return rows
