"""``srt metrics --plot``: the headline series over the job's lifetime, phases marked.

matplotlib with its Agg backend: no display, no browser, the same code for PNG, SVG and
PDF. ``.html`` is a self-contained page with the SVG inline (it opens offline, attached to
a ticket or a CI artifact). Imported only when a plot is asked for (``srt-exporters[plot]``).
"""

from __future__ import annotations

import base64
import html
import io
import os
from datetime import UTC, datetime
from typing import Any

from srt_services.extend import JobRecord

from srt_exporters.headlines import expression
from srt_exporters.promapi import PromClient
from srt_exporters.summary import Window, applicable

FORMATS = (".png", ".svg", ".pdf", ".html")
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


#: a headline and its series: (label, [(time, value), ...]) sorted by label
_Panel = tuple[Any, list[tuple[str, list[tuple[float, float]]]]]


def plot(client: PromClient, job: JobRecord, w: Window, out: str) -> int:
    """Write the plot to ``out``; return how many panels it has."""
    ext = os.path.splitext(out)[1].lower()
    if ext not in FORMATS:
        raise PlotError(f"--plot writes {', '.join(FORMATS)}; got {out!r}")
    plt = _pyplot()
    panels = _panels(client, job, w)
    if not panels:
        raise PlotError(f"no headline series have samples in {job.path}; nothing to plot")
    marks = phase_marks(job)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(10, 2.6 * len(panels) + 0.8), sharex=True, squeeze=False
    )
    for ax, panel in zip(axes[:, 0], panels, strict=True):
        _draw_panel(ax, panel, marks, w.start)
    _label_marks(axes[0, 0], marks, w.start)
    axes[-1, 0].set_xlabel("seconds since the job started")
    started = datetime.fromtimestamp(w.start, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    fig.suptitle(f"{job.job_name} ({job.job_id}), started {started}", fontsize=11)
    fig.tight_layout()
    if ext == ".html":
        buf = io.BytesIO()
        fig.savefig(buf, format="svg")
        _write_html(out, job, buf.getvalue())
    else:
        fig.savefig(out, dpi=110)
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


def _panels(client: PromClient, job: JobRecord, w: Window) -> list[_Panel]:
    """One panel per headline that has samples, at most ``MAX_POINTS`` per series."""
    step = max(w.step, (w.end - w.start) / MAX_POINTS)
    panels: list[_Panel] = []
    for h in applicable(job):
        series = client.query_range(expression(h, job.job_id, w.rate), w.start, w.end, step)
        lines = [(labels.get(h.by, "") or h.by, pts) for labels, pts in series if pts]
        if lines:
            panels.append((h, sorted(lines)))
    return panels


def _draw_panel(ax: Any, panel: _Panel, marks: list[tuple[float, str]], start: float) -> None:
    """A headline's series against seconds since ``start``, each phase mark a dashed line;
    a legend only while it stays readable (12 series)."""
    h, lines = panel
    for label, pts in lines:
        ax.plot([t - start for t, _ in pts], [v for _, v in pts], label=label, lw=1.2)
    ax.set_title(h.title, fontsize=10, loc="left")
    ax.set_ylabel(h.unit)
    ax.grid(alpha=0.3)
    for t, _label in marks:
        ax.axvline(t - start, color="0.5", lw=0.8, ls="--")
    if len(lines) <= 12:
        ax.legend(fontsize=7, loc="upper right")


def _label_marks(top: Any, marks: list[tuple[float, str]], start: float) -> None:
    """The phase marks' names, once, above the top panel (every panel has their lines)."""
    for t, label in marks:
        top.annotate(
            label,
            (t - start, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=7,
            va="bottom",
            ha="center",
            color="0.3",
        )


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
