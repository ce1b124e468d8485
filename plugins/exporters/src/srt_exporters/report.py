"""srt-exporters' part of ``srt report``: the headline series as inline SVG charts.

The report page must open offline and under a policy that runs no foreign script, so the
charts are drawn here as plain SVG (polylines, axes, a legend) rather than with matplotlib
(an optional extra) or a JavaScript charting library (a CDN, or a large inline bundle).
The data is what ``srt metrics`` reads: the job's own Prometheus while it runs, else a
read-only Prometheus on a copy of its database. Percentages are drawn from 0 to 100, and
every other axis from zero, so a small wobble does not look like a plunge.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from srt_services.extend import JobRecord, ReportSection, read_job

from srt_exporters.headlines import Headline, expression
from srt_exporters.promapi import PromClient
from srt_exporters.summary import Window, applicable, job_window

#: at most this many points per series, and this many series per chart
MAX_POINTS = 400
MAX_SERIES = 12
W, H = 900, 220
LEFT, RIGHT, TOP, BOTTOM = 60, 170, 24, 28
PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
)  # fmt: skip

Points = list[tuple[float, float]]


def sections(job_dir: str, binary: str = "prometheus") -> list[ReportSection]:
    """The metrics section, or nothing when the job recorded no metrics."""
    from srt_exporters.viewer import NoMetrics, open_source

    job = read_job(job_dir)
    if not applicable(job):
        return []
    try:
        with open_source(job, binary) as source, PromClient(source.url) as client:
            w = job_window(job)
            panels = collect(client, job, w)
            notes = list(source.warnings)
    except NoMetrics:
        return []
    if not panels:
        return []
    marks = [(t - w.start, label) for t, label in _phases(job)]
    body = [f'<p class="metrics-note">{html.escape(n)}</p>' for n in notes]
    body += [chart(h, lines, w.start, w.end - w.start, marks) for h, lines in panels]
    return [ReportSection("Metrics", '<div id="metrics">' + "\n".join(body) + "</div>", 50)]


def collect(
    client: PromClient, job: JobRecord, w: Window
) -> list[tuple[Headline, list[tuple[str, Points]]]]:
    """Each headline that has samples, with its series by label (sorted)."""
    step = max(w.step, (w.end - w.start) / MAX_POINTS)
    out: list[tuple[Headline, list[tuple[str, Points]]]] = []
    for h in applicable(job):
        series = client.query_range(expression(h, job.job_id, w.rate), w.start, w.end, step)
        lines = sorted((labels.get(h.by, "") or h.by, pts) for labels, pts in series if pts)
        if lines:
            out.append((h, lines))
    return out


def _phases(job: JobRecord) -> list[tuple[float, str]]:
    """(wall time, label) of each phase start and of the stop, for dashed lines."""
    out: list[tuple[float, str]] = []
    for ev in job.events():
        t = ev.get("t")
        if not isinstance(t, (int, float)) or isinstance(t, bool):
            continue  # an edited or cut line: events are a log, never trusted for shape
        if ev.get("event") == "phase_started":
            out.append((float(t), f"phase {ev.get('phase', '?')}"))
        elif ev.get("event") == "stop_requested":
            out.append((float(t), "stop"))
    return out


def nice_max(value: float) -> float:
    """The axis top: the smallest of 1, 2, 2.5, 5 times a power of ten holding ``value``."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    return next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= value)


def chart(
    h: Headline,
    lines: Sequence[tuple[str, Points]],
    start: float,
    duration: float,
    marks: Sequence[tuple[float, str]] = (),
) -> str:
    """One headline as an SVG: seconds since ``start`` against its unit, from zero."""
    e = html.escape
    shown = list(lines)[:MAX_SERIES]
    top = 100.0 if h.unit == "%" else nice_max(max(v for _, pts in shown for _, v in pts))
    duration = max(duration, 1e-3)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + max(0.0, min(t - start, duration)) / duration * pw

    def y(v: float) -> float:
        return TOP + ph - max(0.0, min(v, top)) / top * ph

    out = [
        f'<svg class="metrics-chart" data-key="{e(h.key)}" xmlns="http://www.w3.org/2000/svg"'
        f' width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img">',
        f'<text x="{LEFT}" y="14" font-size="13" font-family="sans-serif">{e(h.title)}'
        f" ({e(h.unit)})</text>",
        f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#bbb"/>',
    ]
    for frac in (0, 0.25, 0.5, 0.75, 1):
        v = top * frac
        out.append(
            f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>'
            f'<text x="{LEFT - 4}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end"'
            f' font-family="sans-serif">{v:g}</text>'
        )
    out.append(
        f'<text x="{LEFT + pw}" y="{H - 6}" font-size="10" text-anchor="end"'
        f' font-family="sans-serif">{duration:.0f}s</text>'
        f'<text x="{LEFT}" y="{H - 6}" font-size="10" font-family="sans-serif">0s</text>'
    )
    for t, label in marks:
        xt = LEFT + max(0.0, min(t, duration)) / duration * pw
        out.append(
            f'<line x1="{xt:.1f}" x2="{xt:.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="#999"'
            f' stroke-dasharray="3 3"><title>{e(label)}</title></line>'
        )
    for n, (label, pts) in enumerate(shown):
        colour = PALETTE[n % len(PALETTE)]
        coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in pts)
        out.append(
            f'<polyline class="series" data-label="{e(label)}" fill="none" stroke="{colour}"'
            f' stroke-width="1.4" points="{coords}"><title>{e(label)}</title></polyline>'
            f'<text x="{LEFT + pw + 8}" y="{TOP + 12 + 14 * n}" font-size="10" fill="{colour}"'
            f' font-family="sans-serif">{e(label[:28])}</text>'
        )
    if len(lines) > MAX_SERIES:
        out.append(
            f'<text x="{LEFT + pw + 8}" y="{TOP + 12 + 14 * MAX_SERIES}" font-size="10"'
            f' font-family="sans-serif">+{len(lines) - MAX_SERIES} more</text>'
        )
    out.append("</svg>")
    return "".join(out)
