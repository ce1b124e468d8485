"""``srt kinds`` as text: the table of every kind, and one kind in full.

The table is the overview (what a kind starts as, where it runs, who provides it); a
narrow terminal first loses what ``srt kinds NAME`` shows anyway. The detail view is where
the long texts live: the summary, the readiness, every option with its description.
"""

from __future__ import annotations

import textwrap
from typing import Any

from srt_services.cli.tables import Column, Step, fit, narrowed_note


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _plugin_short(label: str) -> str:
    """``srt-etcd 1.0.0`` -> ``srt-etcd``; the core's ``srt-services (built-in)`` -> ``built-in``."""
    if label.endswith("(built-in)"):
        return "built-in"
    return label.split(" ", 1)[0]


COLUMNS = (
    Column("TYPE", cut="end"),
    Column("START"),
    Column("CRITICAL", short=lambda v: v, short_header="CRIT"),
    Column("PLACEMENT", short=lambda v: v.split(" (", 1)[0]),
    Column("READINESS", cut="end"),
    Column("EXTERNAL"),
    Column("DEDICATED"),
    Column("PLUGIN", short=_plugin_short, cut="end"),
)

#: What a narrow terminal gives up, in this order; ``srt kinds NAME`` has all of it.
NARROWING = (
    Step("short", "PLUGIN"),
    Step("short", "PLACEMENT"),
    Step("drop", "DEDICATED"),
    Step("drop", "EXTERNAL"),
    Step("short", "CRITICAL"),
)


def kinds_table(rows: list[dict[str, Any]], width: int | None) -> str:
    cells = [
        (
            r["type"],
            r["start"],
            _yes(r["critical"]),
            r["placement"],
            r["readiness"],
            _yes(r["external"]),
            _yes(r["dedicated"]),
            r["plugin"],
        )
        for r in rows
    ]
    fitted = fit(COLUMNS, cells, width, NARROWING)
    note = narrowed_note(fitted, "`srt kinds NAME` shows a kind in full", width)
    return fitted.text() + "".join(line + "\n" for line in note)


def kind_text(detail: dict[str, Any], width: int | None) -> str:
    """One kind in full; prose is wrapped at word boundaries to ``width`` (80 in a pipe)."""
    wrap_at = max(40, min(width or 80, 100))
    out: list[str] = [detail["type"]]
    if detail["summary"]:
        out += textwrap.wrap(
            detail["summary"], wrap_at, initial_indent="  ", subsequent_indent="  "
        )
    out.append("")
    placement = detail["placement"].split(" (", 1)[0]
    if detail["allowed_placements"]:
        placement += f" (allowed: {', '.join(detail['allowed_placements'])})"
    external = _yes(detail["external"])
    if detail["external"] and detail["external_schemes"]:
        external += f" ({', '.join(detail['external_schemes'])})"
    facts = [
        ("plugin", detail["plugin"]),
        ("start", detail["start"]),
        ("critical", _yes(detail["critical"])),
        ("placement", placement),
        ("per", detail["per"]),
        ("readiness", detail["readiness"] or "-"),
        (
            "readiness timeout",
            detail["readiness_timeout_summary"] or f"{detail['readiness_timeout']:g} s",
        ),
        ("readiness interval", f"{detail['readiness_interval']:g} s"),
        ("stop", f"SIG{detail['stop_signal']}, SIGKILL after {detail['stop_grace']:g} s"),
        ("command", detail["command"]),
        ("external", external),
        ("dedicated", _yes(detail["dedicated"])),
    ]
    label_width = max(len(k) for k, _ in facts) + 2
    for key, value in facts:
        lead = f"{key}:".ljust(label_width)
        out += textwrap.wrap(
            str(value),
            wrap_at,
            initial_indent=lead,
            subsequent_indent=" " * label_width,
            break_long_words=False,
            break_on_hyphens=False,
        ) or [lead.rstrip()]
    out.append("")
    fields = detail["option_fields"]
    if not fields:
        out.append("options: none (any `options:` key is refused)")
    else:
        out.append("options:")
        for f in fields:
            default = "required" if f["required"] else f"default {_value_text(f['default'])}"
            out.append(f"  {f['name']}: {f['type']}, {default}")
            if f["description"]:
                out += textwrap.wrap(
                    f["description"],
                    wrap_at,
                    initial_indent="      ",
                    subsequent_indent="      ",
                    break_long_words=False,
                    break_on_hyphens=False,
                )
    return "\n".join(out) + "\n"


def _value_text(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    return str(value)
