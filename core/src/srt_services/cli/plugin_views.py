"""``srt plugins list`` as text: a table, then each problem once, then the counts.

A clash concerns two plugins but is one problem, so it is printed once with both owners
(the JSON keeps it on each record). With ``--verbose`` each plugin is shown in full instead
of as a row, with the traceback of a failed import.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from srt_services.cli.tables import Column, fit, narrowed_note
from srt_services.plugins.discovery import CAPABILITIES as DECLARABLE

if TYPE_CHECKING:
    from srt_services.plugins.discovery import PluginRecord

#: Statuses in the order the summary line counts them.
STATUS_ORDER = ("loaded", "failed", "incompatible", "blocked", "not allowed", "discovered")

#: what PROVIDES shows: every capability a plugin can register (engines, benchmarks and
#: formats too), not the hooks it merely implements
CAPABILITIES = tuple(c for c in DECLARABLE if c != "hook")


def provides_text(record: PluginRecord) -> str:
    shown = record.registered if record.status == "loaded" else record.provides
    parts = []
    for capability in CAPABILITIES:
        names = sorted(shown.get(capability, ()))
        if names:
            parts.append(f"{capability} {', '.join(names)}")
    text = "; ".join(parts) or "-"
    if record.status != "loaded" and parts:
        text += " (declared)"
    return text


def status_detail(record: PluginRecord) -> str:
    """Why a plugin has its status (empty for a loaded one)."""
    if record.status == "loaded":
        return ""
    detail = record.reason
    if record.error:
        detail = f"{detail}: {record.error}" if detail else record.error
    return detail


def problems(
    records: Sequence[PluginRecord], clashes: Sequence[tuple[str, str, list[str]]]
) -> list[str]:
    """Every problem once: failed and incompatible plugins, other problems, clashes."""
    out = []
    for record in records:
        label = f"{record.dist} {record.version}"
        if record.status in {"failed", "incompatible"}:
            out.append(f"{label}: {record.status}: {status_detail(record)}")
        out += [f"{label}: {p}" for p in record.problems if p not in record.clashes]
    for capability, name, owners in clashes:
        out.append(
            f"{capability} {name!r} is registered by both {' and '.join(owners)}: neither can"
            " be used; uninstall one, or block it (plugins.block, SRT_DISABLED_PLUGINS)"
        )
    return out


def summary(records: Sequence[PluginRecord], clashes: Sequence[object]) -> str:
    counts: dict[str, int] = {}
    for record in records:
        counts[record.status] = counts.get(record.status, 0) + 1
    text = ", ".join(f"{counts[s]} {s}" for s in STATUS_ORDER if s in counts)
    if clashes:
        text += f"; {len(clashes)} clash{'es' if len(clashes) > 1 else ''}"
    return f"{len(records)} plugin(s): {text}"


def _wrap(text: str, width: int | None, indent: str) -> list[str]:
    if width is None:
        return [indent + text]
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent + "    ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def _table(records: Sequence[PluginRecord], width: int | None) -> list[str]:
    columns = (
        Column("PLUGIN", cut="end"),
        Column("VERSION"),
        Column("STATUS"),
        Column("PROVIDES", cut="end"),
    )
    rows = [(r.dist, r.version, r.status, provides_text(r)) for r in records]
    fitted = fit(columns, rows, width)
    return fitted.lines + narrowed_note(fitted, "`srt plugins list -v` shows it all", width)


def _blocks(records: Sequence[PluginRecord]) -> list[str]:
    out: list[str] = []
    for record in records:
        detail = status_detail(record)
        out.append(f"{record.dist} {record.version}  {record.status}")
        if detail:
            out.append(f"  why:         {detail}")
        out.append(f"  location:    {record.location}")
        out.append(f"  entry point: {record.entry_name} = {record.module}")
        out.append(f"  provides:    {provides_text(record)}")
        hooks = record.hooks or sorted(record.provides.get("hook", ()))
        out.append(f"  hooks:       {', '.join(hooks) or '-'}")
        if record.core_requirement:
            out.append(f"  requires:    {record.core_requirement}")
        if record.traceback:
            out.append("  traceback:")
            out += ["    " + line for line in record.traceback.rstrip("\n").splitlines()]
        out.append("")
    return out


def inventory_text(
    records: Sequence[PluginRecord],
    clashes: Sequence[tuple[str, str, list[str]]],
    verbose: bool,
    width: int | None,
) -> str:
    lines = _blocks(records) if verbose else [*_table(records, width), ""]
    found = problems(records, clashes)
    if found:
        lines.append("problems:")
        for problem in found:
            lines += _wrap(problem, width, "  ")
        lines.append("")
    lines.append(summary(records, clashes))
    if not verbose and any(r.traceback for r in records):
        lines.append("`srt plugins list -v` shows the traceback of each failed import.")
    return "".join(line + "\n" for line in lines)
