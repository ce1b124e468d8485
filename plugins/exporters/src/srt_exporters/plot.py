"""``srt metrics --plot``: the headline series over the job's lifetime, phases marked, and
what the recipe's own ``metrics:`` endpoints export.

The figure is built from :class:`Panel` values (the series as Prometheus returned them), so
what it shows can be checked without looking at pixels.

matplotlib with its Agg backend: no display, no browser, the same code for PNG, SVG and
PDF. ``.html`` is a self-contained page with the SVG inline (it opens offline, attached to
a ticket or a CI artifact). Imported only when a plot is asked for (``srt-exporters[plot]``).
"""

from __future__ import annotations

import base64
import html
import io
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from srt_services.extend import JobRecord

from srt_exporters.headlines import expression
from srt_exporters.kind import DCGM, NODE, PROCESS
from srt_exporters.promapi import PromClient
from srt_exporters.prometheus import KIND as PROMETHEUS
from srt_exporters.summary import Window, applicable, selector

FORMATS = (".png", ".svg", ".pdf", ".html")
DPI = 110
#: at most this many points per series
MAX_POINTS = 600


class PlotError(Exception):
    pass


def phase_marks(job: JobRecord) -> list[tuple[float, str]]:
    """(time, label) of each phase start and of the job's serving and stop, in order."""
    marks: list[tuple[float, str]] = []
    for e in job.events():
        ev = e.get("event")
        if ev == "phase_started":
            marks.append((float(e["t"]), str(e.get("phase", "?"))))
        elif ev == "serving":
            marks.append((float(e["t"]), "serving"))
        elif ev == "stop_requested":
            marks.append((float(e["t"]), "stop"))
    return marks


@dataclass(frozen=True, slots=True)
class Panel:
    """One chart: its title, its unit, and its series (label, [(time, value), ...]) sorted
    by label."""

    title: str
    unit: str
    lines: list[tuple[str, list[tuple[float, float]]]]


#: the recipe's own endpoints: at most this many panels of what they export
MAX_OWN_PANELS = 8
#: what every Prometheus client library exports about itself, not what the endpoint is for
_CLIENT_PREFIXES = ("process_", "python_", "go_", "promhttp_", "scrape_")
_EXPORTER_KINDS = frozenset({NODE, PROCESS, DCGM, PROMETHEUS})
#: pixels left between two phase labels
LABEL_GAP = 6.0


def plot(client: PromClient, job: JobRecord, w: Window, out: str) -> int:
    """Write the plot to ``out``; return how many panels it has."""
    ext = os.path.splitext(out)[1].lower()
    if ext not in FORMATS:
        raise PlotError(f"--plot writes {', '.join(FORMATS)}; got {out!r}")
    plt = _pyplot()
    panels = collect_panels(client, job, w)
    fig = figure(plt, panels, phase_marks(job), title(job, w), w)
    try:
        if ext == ".html":
            buf = io.BytesIO()
            fig.savefig(buf, format="svg")
            _write_html(out, job, buf.getvalue())
        else:
            fig.savefig(out, dpi=DPI)
    finally:
        plt.close(fig)
    return len(panels)


def _pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend (files only: no display is needed or used)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError("--plot needs matplotlib: pip install 'srt-exporters[plot]'") from None
    return plt


def collect_panels(client: PromClient, job: JobRecord, w: Window) -> list[Panel]:
    """The headlines that have samples, then what the recipe's own endpoints export."""
    panels = _headline_panels(client, job, w) + own_panels(client, job, w)
    if not panels:
        raise PlotError(f"no headline series have samples in {job.path}; nothing to plot")
    return panels


def _step(w: Window) -> float:
    """The plot's resolution: the scrape interval, coarser only past ``MAX_POINTS``."""
    return max(w.step, (w.end - w.start) / MAX_POINTS)


def _headline_panels(client: PromClient, job: JobRecord, w: Window) -> list[Panel]:
    panels: list[Panel] = []
    for h in applicable(job):
        series = client.query_range(
            expression(h, job.job_id, w.rate_for(h)), w.start, w.end, _step(w)
        )
        lines = [(labels.get(h.by, "") or h.by, pts) for labels, pts in series if pts]
        if lines:
            panels.append(Panel(h.title, h.unit, sorted(lines)))
    return panels


def own_services(job: JobRecord) -> list[str]:
    """The units whose ``metrics:`` endpoints the recipe declared (not the exporters and
    Prometheus this plugin runs), in plan order."""
    if job.plan is None:
        return []
    return [u.name for u in job.plan.units if u.metrics and u.type not in _EXPORTER_KINDS]


def own_panels(client: PromClient, job: JobRecord, w: Window) -> list[Panel]:
    """One panel per metric a recipe's endpoint exports, one line per instance: a counter
    (``*_total``) as its rate per second, anything else as it is. The client libraries'
    own series (``process_*``, ``python_*``...) and histogram buckets are left out; at
    most :data:`MAX_OWN_PANELS` (names in order)."""
    panels: list[Panel] = []
    sel = selector(job)
    for service in own_services(job):
        svc = service.replace("\\", "\\\\").replace('"', '\\"')
        found = client.series(f'{{{sel},service="{svc}"}}', w.start, w.end)
        names = sorted(
            {
                n
                for n in (labels.get("__name__", "") for labels in found)
                if n
                and n != "up"
                and not n.startswith(_CLIENT_PREFIXES)
                and not n.endswith(("_bucket", "_created"))
            }
        )
        for name in names:
            if len(panels) >= MAX_OWN_PANELS:
                return panels
            inner = f'{name}{{{sel},service="{svc}"}}'
            if name.endswith("_total"):
                expr, unit = f"sum by (instance) (rate({inner}[{w.rate}]))", "per s"
                title = f"{service}: {name} (rate)"
            else:
                expr, unit, title = f"sum by (instance) ({inner})", "", f"{service}: {name}"
            series = client.query_range(expr, w.start, w.end, _step(w))
            lines = [(labels.get("instance", service), pts) for labels, pts in series if pts]
            if lines:
                panels.append(Panel(title, unit, sorted(lines)))
    return panels


def title(job: JobRecord, w: Window) -> str:
    started = datetime.fromtimestamp(w.start, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{job.job_name} ({job.job_id}), started {started}"


def figure(
    plt: Any, panels: list[Panel], marks: list[tuple[float, str]], heading: str, w: Window
) -> Any:
    """The figure: the title, a strip of phase labels, then one panel per series set.

    A short job starts every phase in its first second, so the labels cannot sit side by
    side above their lines: each goes in the first row of the strip where it clears every
    other label (measured with the renderer), and the strip gets as many rows as that
    takes. The axes are placed by hand, in inches from the top, so the title, the strip
    and each panel's title have their own room whatever the number of rows.
    """
    span = max(w.end - w.start, 1.0)
    n = len(panels)
    fig = plt.figure(figsize=(FIG_WIDTH, 4.0))
    strip = fig.add_axes((LEFT, 0.5, RIGHT - LEFT, 0.1))
    strip.set_xlim(0, span)
    texts = _label_marks(strip, marks, w.start)
    rows = _assign_rows(fig, texts)
    strip.set_ylim(rows, 0)
    strip_h = ROW_HEIGHT * rows
    height = TITLE_ROOM + strip_h + n * (PANEL_HEIGHT + PANEL_GAP) + BOTTOM_ROOM
    fig.set_figheight(height)

    def frac(top_in: float, h: float) -> tuple[float, float, float, float]:
        return (LEFT, 1 - (top_in + h) / height, RIGHT - LEFT, h / height)

    strip.set_position(frac(TITLE_ROOM, strip_h))
    top = TITLE_ROOM + strip_h
    axes = []
    for panel in panels:
        top += PANEL_GAP
        ax = fig.add_axes(frac(top, PANEL_HEIGHT), sharex=strip)
        _draw_panel(ax, panel, marks, w.start)
        axes.append(ax)
        top += PANEL_HEIGHT
    strip.set_xlim(0, span)
    axes[-1].set_xlabel("seconds since the job started")
    for ax in axes[:-1]:
        ax.tick_params(labelbottom=False)
    fig.suptitle(heading, fontsize=11, y=1 - 0.15 / height, va="top")
    return fig


FIG_WIDTH = 10.0
#: the axes' left and right edges, as fractions of the width (room for the y labels)
LEFT, RIGHT = 0.08, 0.97
#: inches: above the strip (the title), per strip row, per panel, above each panel (its
#: title and the ticks of the one above), below the last (its tick labels and x label)
TITLE_ROOM, ROW_HEIGHT, PANEL_HEIGHT, PANEL_GAP, BOTTOM_ROOM = 0.55, 0.2, 2.0, 0.45, 0.55


def _draw_panel(ax: Any, panel: Panel, marks: list[tuple[float, str]], start: float) -> None:
    """A panel's series against seconds since ``start``, each phase mark a dashed line; a
    legend only while it stays readable (12 series). Percentages are drawn on 0-100 and
    everything else from zero: an autoscaled axis makes a 0.1 % dip look like a plunge."""
    for label, pts in panel.lines:
        ax.plot([t - start for t, _ in pts], [v for _, v in pts], label=label, lw=1.2)
    ax.set_title(panel.title, fontsize=10, loc="left")
    ax.set_ylabel(panel.unit)
    ax.grid(alpha=0.3)
    for t, _label in marks:
        ax.axvline(t - start, color="0.5", lw=0.8, ls="--")
    values = [v for _, pts in panel.lines for _, v in pts]
    if panel.unit == "%":
        ax.set_ylim(0, max(100.0, *values))
    elif values and min(values) >= 0:
        ax.set_ylim(bottom=0, top=max(max(values) * 1.05, 1e-9))
    if len(panel.lines) <= 12:
        ax.legend(fontsize=7, loc="upper right")


def _label_marks(strip: Any, marks: list[tuple[float, str]], start: float) -> list[Any]:
    """Each mark's line and its name and time in the strip (their rows come after)."""
    strip.set_yticks([])
    strip.tick_params(labelbottom=False, bottom=False)
    for side in ("top", "right", "left", "bottom"):
        strip.spines[side].set_visible(False)
    texts = []
    span = strip.get_xlim()[1]
    for t, label in marks:
        x = t - start
        strip.axvline(x, color="0.5", lw=0.8, ls="--")
        left = x <= 0.7 * span  # near the right edge a label reads leftwards
        texts.append(
            strip.text(
                min(max(x, 0.0), span),  # a mark outside the window: its label at the edge
                0.5,
                f"{label} {x:.1f}s",
                ha="left" if left else "right",
                va="center",
                fontsize=7,
                color="0.2",
                bbox={"boxstyle": "square,pad=0.15", "fc": "white", "ec": "none"},
            )
        )
    return texts


def _assign_rows(fig: Any, texts: list[Any]) -> int:
    """Put each label in the first row where it clears every label already there; return
    how many rows that took."""
    renderer = fig.canvas.get_renderer()
    ends: list[float] = []  # per row: the right edge of its last label, in pixels
    for text in sorted(texts, key=lambda t: t.get_window_extent(renderer).x0):
        box = text.get_window_extent(renderer)
        for row, end in enumerate(ends):
            if box.x0 >= end + LABEL_GAP:
                ends[row] = box.x1
                break
        else:
            row = len(ends)
            ends.append(box.x1)
        text.set_y(row + 0.5)
    return max(1, len(ends))


def _write_html(out: str, job: JobRecord, svg: bytes) -> None:
    title = html.escape(f"srt metrics: {job.job_name} ({job.job_id})")
    data = base64.b64encode(svg).decode()
    page = (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{title}</title></head>\n"
        f"<body><h1 style='font-family:sans-serif;font-size:16px'>{title}</h1>\n"
        f"<img alt='headline series' src='data:image/svg+xml;base64,{data}'>\n</body></html>\n"
    )
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(page)
