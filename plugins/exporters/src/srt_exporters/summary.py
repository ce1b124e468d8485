"""What ``srt metrics`` reports: every target's scrape record and the headline series.

Everything is asked of Prometheus over the job's lifetime (from its start to its end, or
to now while it runs), as instant queries at the end of that window over ranges and
subqueries, so a finished job's record and a running job give the same shapes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from srt_services.extend import JobRecord

from srt_exporters.headlines import HEADLINES, Headline, expression
from srt_exporters.promapi import PromClient
from srt_exporters.prometheus import KIND as PROMETHEUS

DEFAULT_INTERVAL = 15.0


@dataclass(frozen=True, slots=True)
class Window:
    """The job's lifetime as Prometheus sees it, and the resolution to look at it with."""

    start: float
    end: float
    #: the scrape interval: the step of subqueries and plots
    step: float
    #: when instant queries look: the moment the job was asked to stop (every target was
    #: still scraped then; a stopped target's series ends with it), else ``end``
    at: float = 0.0

    @property
    def range(self) -> str:
        return f"{max(1, math.ceil(self.end - self.start + self.step))}s"

    @property
    def rate(self) -> str:
        """A ``rate()`` window holding at least four scrapes."""
        return self.rate_for()

    def rate_for(self, h: Headline | None = None) -> str:
        """A ``rate()`` window holding at least four scrapes of ``h``'s targets (some are
        scraped more slowly than the job's interval)."""
        slowest = max(self.step, h.slowest_scrape if h is not None else 0.0)
        return f"{max(4 * slowest, 4.0):g}s"


def scrape_interval(job: JobRecord) -> float:
    for unit in job.plan.units if job.plan is not None else ():
        if unit.type == PROMETHEUS:
            value = unit.options.get("scrape_interval_seconds")
            if isinstance(value, (int, float)):
                return float(value)
    return DEFAULT_INTERVAL


def job_window(job: JobRecord) -> Window:
    start = job.started
    if start is None:
        events = job.events()
        start = events[0]["t"] if events else time.time()
    end = job.ended if job.ended is not None else time.time()
    end = max(end, start + 1.0)
    at = end
    if job.ended is not None:
        stops = [e["t"] for e in job.events() if e.get("event") == "stop_requested"]
        if stops:
            at = min(max(stops[-1], start), end)
    return Window(start=start, end=end, step=scrape_interval(job), at=at)


def selector(job: JobRecord) -> str:
    return 'job_id="' + job.job_id.replace("\\", "\\\\").replace('"', '\\"') + '"'


def targets(client: PromClient, job: JobRecord, w: Window) -> list[dict[str, Any]]:
    """One row per planned target (and any other the job's Prometheus scraped)."""
    sel, rng = selector(job), w.range
    at = w.end
    total = {m["instance"]: v for m, v in client.query(f"count_over_time(up{{{sel}}}[{rng}])", at)}
    ok = {m["instance"]: v for m, v in client.query(f"sum_over_time(up{{{sel}}}[{rng}])", at)}
    last = {m["instance"]: v for m, v in client.query(f"last_over_time(up{{{sel}}}[{rng}])", at)}
    took = {
        m["instance"]: v
        for m, v in client.query(f"avg_over_time(scrape_duration_seconds{{{sel}}}[{rng}])", at)
    }
    labels = {m["instance"]: m for m, _ in client.query(f"last_over_time(up{{{sel}}}[{rng}])", at)}
    rows: list[dict[str, Any]] = []
    planned = job.plan.scrape_targets if job.plan is not None else []
    names = [t.name for t in planned] + sorted(set(total) - {t.name for t in planned})
    by_name = {t.name: t for t in planned}
    for name in names:
        t = by_name.get(name)
        m = labels.get(name, {})
        scrapes = int(total.get(name, 0))
        rows.append(
            {
                "instance": name,
                "service": (t.service if t else "") or m.get("service", ""),
                "node": (t.node if t else "") or m.get("node", ""),
                "url": t.url if t else "",
                "scrapes": scrapes,
                "failed": scrapes - int(ok.get(name, 0)),
                "up": None if name not in last else last[name] == 1.0,
                "scrape_seconds": took.get(name),
            }
        )
    return rows


def sources(job: JobRecord) -> set[str]:
    """The kinds (and ``workers``) of the plan that serve metrics."""
    out: set[str] = set()
    for unit in job.plan.units if job.plan is not None else ():
        if not unit.instances:
            continue
        if unit.category == "workers" and unit.metrics:
            out.add("workers")
        else:
            out.add(unit.type)
    return out


def unavailable(job: JobRecord) -> list[dict[str, str]]:
    """The instances that ran without what they run on their node (an exporter whose
    binary the node lacks): which service, on which node, and why, from events.jsonl. The
    metrics of those nodes are missing from the headlines, and this says so."""
    seen: dict[str, dict[str, str]] = {}
    for ev in job.events():
        if ev.get("event") == "unavailable":
            seen[str(ev.get("step"))] = {
                "service": str(ev.get("unit", "")),
                "node": str(ev.get("node", "")),
                "reason": str(ev.get("reason", "")),
            }
    return list(seen.values())


def applicable(job: JobRecord) -> list[Headline]:
    have = sources(job)
    return [h for h in HEADLINES if h.source in have]


def headlines(client: PromClient, job: JobRecord, w: Window) -> list[dict[str, Any]]:
    out = []
    for h in applicable(job):
        expr = expression(h, job.job_id, w.rate_for(h))
        sub = f"({expr})[{w.range}:{w.step:g}s]"
        stats: dict[str, dict[str, Any]] = {}
        for fn in ("avg", "max", "last"):
            for labels, value in client.query(f"{fn}_over_time({sub})", w.end):
                key = labels.get(h.by, "")
                stats.setdefault(key, {h.by: key})[fn] = value
        out.append(
            {
                "key": h.key,
                "title": h.title,
                "unit": h.unit,
                "expr": expr,
                "by": h.by,
                "series": [stats[k] for k in sorted(stats)],
            }
        )
    return out


def collect(client: PromClient, job: JobRecord, live: bool, url: str) -> dict[str, Any]:
    w = job_window(job)
    return {
        "job": {
            "name": job.job_name,
            "id": job.job_id,
            "dir": job.path,
            "running": job.running,
            "status": job.status,
        },
        "source": {"url": url, "live": live},
        "window": {"start": w.start, "end": w.end, "step": w.step},
        "targets": targets(client, job, w),
        "headlines": headlines(client, job, w),
        "unavailable": unavailable(job),
        "file_sd": job.paths.scrape_targets_file,
    }


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not math.isfinite(value):
        return "-"
    return f"{value:.{digits}f}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows]


def render(report: dict[str, Any]) -> str:
    job, src, w = report["job"], report["source"], report["window"]
    seconds = w["end"] - w["start"]
    state = "running" if job["running"] else (job["status"] or "ended")
    where = (
        f"the job's Prometheus at {src['url']}"
        if src["live"]
        else "its record (a Prometheus on a copy of metrics/tsdb)"
    )
    lines = [f"Job {job['name']} ({job['id']}): {state}, {seconds:.0f} s; metrics from {where}"]
    rows = [["service", "node", "instance", "up", "scrapes", "failed", "scrape s"]]
    for t in report["targets"]:
        up = "never" if t["up"] is None else ("yes" if t["up"] else "no")
        rows.append(
            [
                t["service"],
                t["node"],
                t["instance"],
                up,
                str(t["scrapes"]),
                str(t["failed"]),
                _num(t["scrape_seconds"], 3),
            ]
        )
    lines.append("Targets (up: at the last scrape; failed: scrapes that failed):")
    lines.extend(_table(rows) if len(rows) > 1 else ["  none"])
    missing = report.get("unavailable") or []
    if missing:
        lines.append("Ran without (unavailable on their node, so no metrics from them there):")
        mrows = [["service", "node", "why"]]
        mrows += [[m["service"], m["node"], m["reason"]] for m in missing]
        lines.extend(_table(mrows))
    lines.append("Headlines (average, maximum and last value over the job):")
    if not report["headlines"]:
        lines.append("  none (no node-exporter, dcgm-exporter, process-exporter or worker metrics)")
    for h in report["headlines"]:
        lines.append(f"  {h['title']} ({h['unit']})")
        if not h["series"]:
            lines.append("    no samples")
            continue
        hrows = [[h["by"], "avg", "max", "last"]]
        hrows += [
            [s[h["by"]] or "-", _num(s.get("avg")), _num(s.get("max")), _num(s.get("last"))]
            for s in h["series"]
        ]
        lines.extend("  " + line for line in _table(hrows))
    lines.append(
        f"Scrape targets (Prometheus file_sd): {report['file_sd']}; point your own"
        " Prometheus or Grafana's at it with file_sd_configs: [{files: [<that path>]}]"
    )
    return "\n".join(lines) + "\n"
