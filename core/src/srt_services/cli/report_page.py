"""``srt report``'s page: the report model as one self-contained HTML file.

Everything is inline (CSS, one small script, the timeline as SVG), so the page opens from
a ticket, a CI artifact or a laptop without network. A Content-Security-Policy forbids
every fetch and runs only the script carrying this page's nonce: a ``<script>`` that a log
line or a service name smuggled past the escaping would still not run. Every string from
the job goes through :func:`html.escape` (quotes too: names end up in attributes).
"""

from __future__ import annotations

import html
import math
import secrets
import time
from collections.abc import Callable

from srt_services.app.report import LogTail, Mark, Report, Row
from srt_services.contracts.report import ReportSection

#: the timeline's geometry (px)
LABEL_W = 260
PLOT_W = 900
ROW_H = 22
TOP = 28

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 .3em}h2{font-size:16px;margin:1.6em 0 .4em}
.status-failed,.status-lost{color:#b00020}.status-succeeded{color:#137333}
table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px;text-align:left}
th{background:#f4f4f4}.cause{background:#fff4f4;border-left:4px solid #b00020;padding:6px 10px}
.cause.ok{background:#f3faf4;border-left-color:#137333}
pre{background:#f7f7f7;border:1px solid #ddd;padding:6px;overflow-x:auto;font-size:12px}
#timeline text{font:11px system-ui,sans-serif}
.span-starting{fill:#f4c542}.span-ready{fill:#4a90d9}.span-open{opacity:.85}
.span-failed{fill:#d9534f}.row-bg{fill:#fafafa}.row-bg.alt{fill:#f0f0f0}
.mark-exit{fill:#b00020}.mark-restart{fill:#e69500}.mark-ready{fill:#137333}
.mark-trouble{fill:#7b1fa2}.jmark{stroke:#888;stroke-dasharray:3 3}
.jmark-stop{stroke:#b00020;stroke-dasharray:none}.grid{stroke:#e4e4e4}
#hover{min-height:1.4em;font-size:13px;color:#333}
.legend span{display:inline-block;width:12px;height:12px;margin:0 4px 0 12px;vertical-align:-2px}
"""

# Shows what is hovered (every shape carries a <title> too, for when scripts are off).
_JS = """
(function(){
  var out=document.getElementById('hover');
  document.querySelectorAll('#timeline [data-info]').forEach(function(el){
    el.addEventListener('mouseenter',function(){out.textContent=el.getAttribute('data-info');});
  });
  document.body.setAttribute('data-ready','1');
})();
"""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def render_page(report: Report) -> str:
    nonce = secrets.token_urlsafe(16)
    csp = (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'nonce-{nonce}'; form-action 'none'; base-uri 'none'"
    )
    title = f"srt report: {report.job_name} ({report.job_id})"
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        _summary(report),
        "<h2>Timeline</h2>",
        _legend(),
        '<div id="hover"></div>',
        _timeline(report),
        _milestones(report.marks),
        "<h2>Plan</h2>",
        _plan(report),
        _tails(report.tails),
        *(_section(label, s) for label, s in report.sections),
        f'<script nonce="{nonce}">{_JS}</script>',
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def _summary(r: Report) -> str:
    code = f", exit code {r.exit_code}" if r.exit_code is not None else ""
    rows = [
        f'<p>Status: <strong class="status-{_e(r.status)}" id="job-status">{_e(r.status)}</strong>{code}'
        f" · started {_e(_clock(r.started))} · {r.duration:.1f}s"
        + (f" · launcher {_e(r.launcher)}" if r.launcher else "")
        + "</p>",
        f"<p>Job directory: <code>{_e(r.path)}</code></p>",
    ]
    if r.cause:
        ok = r.status == "succeeded"
        rows.append(
            f'<p class="{"cause ok" if ok else "cause"}" id="cause">'
            f"{'Ended' if ok else 'Stopped'} because: {_e(r.cause)}</p>"
        )
    return "\n".join(rows)


def _legend() -> str:
    items = [
        ("#f4c542", "starting"),
        ("#4a90d9", "ready"),
        ("#d9534f", "failed attempt"),
        ("#e69500", "restart"),
        ("#b00020", "exit / stop"),
        ("#7b1fa2", "trouble"),
    ]
    spans = "".join(f'<span style="background:{c}"></span>{_e(n)}' for c, n in items)
    return f'<p class="legend">{spans}</p>'


def _ticks(duration: float) -> list[float]:
    """Round seconds for the time axis, about ten of them."""
    if duration <= 0:
        return [0.0]
    raw = duration / 10
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [i * step for i in range(int(duration / step) + 1)]


def _timeline(r: Report) -> str:
    span = max(r.duration, 1e-3)

    def x(t: float) -> float:
        return LABEL_W + max(0.0, min(t, span)) / span * PLOT_W

    height = TOP + ROW_H * max(1, len(r.rows)) + 10
    width = LABEL_W + PLOT_W + 20
    out = [
        f'<svg id="timeline" xmlns="http://www.w3.org/2000/svg" width="{width}"'
        f' height="{height}" viewBox="0 0 {width} {height}" role="img">'
    ]
    for t in _ticks(r.duration):
        out.append(
            f'<line class="grid" x1="{x(t):.1f}" y1="{TOP - 6}" x2="{x(t):.1f}" y2="{height}"/>'
            f'<text x="{x(t):.1f}" y="{TOP - 10}" text-anchor="middle">{t:g}s</text>'
        )
    for n, row in enumerate(r.rows):
        out.append(_row(row, n, x))
    for m in r.marks:
        cls = "jmark jmark-stop" if m.kind in {"stop", "end"} else "jmark"
        out.append(
            f'<g class="job-mark" data-kind="{_e(m.kind)}" data-info="{_e(_at(m))}">'
            f'<line class="{cls}" x1="{x(m.t):.1f}" y1="{TOP - 4}" x2="{x(m.t):.1f}"'
            f' y2="{height}"/><title>{_e(_at(m))}</title></g>'
        )
    out.append("</svg>")
    return "\n".join(out)


def _at(m: Mark) -> str:
    return f"+{m.t:.2f}s {m.label}"


def _row(row: Row, n: int, x: Callable[[float], float]) -> str:
    y = TOP + n * ROW_H
    label = f"{row.step} @ {row.node}"
    info = f"{row.step} ({row.unit}) on {row.node}: {row.state}, {row.restarts} restart(s)"
    if row.exit_code is not None:
        info += f", exit code {row.exit_code}"
    parts = [
        f'<g class="row" data-step="{_e(row.step)}" data-unit="{_e(row.unit)}"'
        f' data-node="{_e(row.node)}" data-state="{_e(row.state)}"'
        f' data-restarts="{row.restarts}" data-attempts="{len(row.spans)}">',
        f'<rect class="row-bg{" alt" if n % 2 else ""}" x="0" y="{y}" width="{LABEL_W + PLOT_W}"'
        f' height="{ROW_H}"/>',
        f'<text x="4" y="{y + 15}" data-info="{_e(info)}">{_e(_short(label))}'
        f"<title>{_e(info)}</title></text>",
    ]
    for s in row.spans:
        ready = s.ready if s.ready is not None else s.end
        failed = s.failed
        how = "still running at the end" if s.open else f"exit {s.code}"
        info_s = f"{row.step} attempt {s.attempt}: +{s.start:.2f}s to +{s.end:.2f}s, {how}"
        cls_open = " span-open" if s.open else ""
        parts.append(
            f'<g class="span{" span-failed-attempt" if failed else ""}"'
            f' data-attempt="{s.attempt}" data-info="{_e(info_s)}"><title>{_e(info_s)}</title>'
        )
        start_cls = "span-failed" if failed and s.ready is None else "span-starting"
        parts.append(
            f'<rect class="{start_cls}{cls_open}" x="{x(s.start):.1f}" y="{y + 4}"'
            f' width="{max(1.0, x(ready) - x(s.start)):.1f}" height="{ROW_H - 8}"/>'
        )
        if s.ready is not None:
            ready_cls = "span-failed" if failed else "span-ready"
            parts.append(
                f'<rect class="{ready_cls}{cls_open}" x="{x(s.ready):.1f}" y="{y + 4}"'
                f' width="{max(1.0, x(s.end) - x(s.ready)):.1f}" height="{ROW_H - 8}"/>'
            )
        parts.append("</g>")
    for m in row.marks:
        cx, cy = x(m.t), y + ROW_H / 2
        shape = (
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4"/>'
            if m.kind in {"ready"}
            else f'<path d="M{cx - 5:.1f},{cy - 6:.1f} l5,6 l-5,6 h10 l-5,-6 l5,-6 z"/>'
            if m.kind == "exit"
            else f'<rect x="{cx - 4:.1f}" y="{cy - 4:.1f}" width="8" height="8"/>'
        )
        parts.append(
            f'<g class="mark mark-{_e(m.kind)}" data-kind="{_e(m.kind)}" data-t="{m.t:.3f}"'
            f' data-info="{_e(_at(m))}">{shape}<title>{_e(_at(m))}</title></g>'
        )
    parts.append("</g>")
    return "".join(parts)


def _milestones(marks: list[Mark]) -> str:
    """The job's marks as text too: the timeline's dashed lines say their names on hover only
    (labels on the lines would print over each other when phases start a moment apart)."""
    if not marks:
        return ""
    rows = "".join(
        f'<tr data-kind="{_e(m.kind)}"><td>+{m.t:.2f}s</td><td>{_e(m.label)}</td></tr>'
        for m in marks
    )
    return f'<table id="milestones"><tr><th>when</th><th>what</th></tr>{rows}</table>'


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _plan(r: Report) -> str:
    if not r.units:
        return "<p>No plan was written (the job never started).</p>"
    head = (
        "<tr><th>unit</th><th>type</th><th>category</th><th>phase</th><th>critical</th>"
        "<th>nodes</th><th>ports</th><th>implied by</th></tr>"
    )
    body = "".join(
        f"<tr><td>{_e(u.name)}</td><td>{_e(u.type)}</td><td>{_e(u.category)}</td>"
        f"<td>{_e(u.phase)}</td><td>{'yes' if u.critical else 'no'}</td>"
        f"<td>{_e(', '.join(u.nodes))}</td><td>{_e(', '.join(map(str, u.ports)))}</td>"
        f"<td>{_e(u.implied_by or '')}</td></tr>"
        for u in r.units
    )
    nodes = "".join(f"<tr><td>{_e(n)}</td><td>{_e(ip)}</td></tr>" for n, ip in r.nodes.items())
    return (
        f'<table id="plan">{head}{body}</table>'
        f'<h2>Nodes</h2><table id="nodes"><tr><th>node</th><th>address</th></tr>{nodes}</table>'
    )


def _tails(tails: list[LogTail]) -> str:
    if not tails:
        return ""
    out = ["<h2>Logs of what failed</h2>"]
    for t in tails:
        body = _e(t.error) if t.error else _e("\n".join(t.lines))
        out.append(
            f'<div class="log-tail" data-step="{_e(t.step)}"><h3>{_e(t.step)} ({_e(t.state)}):'
            f" <code>{_e(t.path)}</code></h3><pre>{body}</pre></div>"
        )
    return "\n".join(out)


def _section(label: str, section: ReportSection | str) -> str:
    if isinstance(section, str):
        return (
            f'<h2>{_e(label)}</h2><p class="plugin-error">This plugin failed to draw its'
            f" part: {_e(section)}</p>"
        )
    return (
        f'<section class="plugin-section" data-plugin="{_e(label)}"><h2>{_e(section.title)}'
        f"</h2>{section.html}</section>"
    )
