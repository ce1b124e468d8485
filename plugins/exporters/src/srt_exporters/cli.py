"""``srt metrics JOBDIR``: a job's metrics from its Prometheus, while it runs or after.

Heavy imports (httpx, matplotlib) happen inside the command, so listing srt's commands
costs nothing.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

import rich_click as click

if TYPE_CHECKING:
    from srt_services.extend import JobRecord


@click.command()
@click.argument("job_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="The report (or --query result) as JSON.")
@click.option(
    "--query",
    "promql",
    metavar="PROMQL",
    help="Run this PromQL instant query (at the moment the job was asked to stop, or now"
    " while it runs) and print the result.",
)
@click.option(
    "--plot",
    "plot_out",
    metavar="OUT",
    type=click.Path(dir_okay=False),
    help="Draw the headline series over the job's lifetime, phases marked: OUT.png, .svg,"
    " .pdf or .html (needs srt-exporters[plot]).",
)
@click.option(
    "--prometheus",
    "binary",
    default="prometheus",
    show_default=True,
    help="Prometheus binary used to read a finished job's database.",
)
def metrics(
    job_dir: str, as_json: bool, promql: str | None, plot_out: str | None, binary: str
) -> None:
    """Show a job's metrics: every scrape target (up, failed scrapes) and the headline
    series (CPU, memory, GPU, per-process CPU, request rate) over the job's lifetime.

    While the job runs, its own Prometheus answers; after it ended, a Prometheus is started
    read-only on a copy of the job's database (JOB_DIR/metrics/tsdb). The scrape targets
    are in JOB_DIR/metrics/targets.json (Prometheus file_sd) for your own Prometheus or
    Grafana.
    """
    from srt_services.extend import read_job

    from srt_exporters.promapi import PromError
    from srt_exporters.viewer import Interrupted, NoMetrics

    job = read_job(job_dir)
    try:
        _show(job, binary, promql, plot_out, as_json)
    except (NoMetrics, PromError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # the scratch directory, the log of the temporary Prometheus
        where = f"{exc.filename}: " if exc.filename else ""
        raise click.ClickException(
            f"cannot read the job's metrics: {where}{exc.strerror}"
        ) from None
    except Interrupted as exc:
        sys.stderr.write(
            f"srt metrics: {exc.name}: stopped (the temporary Prometheus, if one ran, is"
            " stopped and its copy of the database removed)\n"
        )
        sys.exit(128 + exc.signum)


def _show(
    job: JobRecord, binary: str, promql: str | None, plot_out: str | None, as_json: bool
) -> None:
    from srt_exporters.promapi import PromClient, PromError
    from srt_exporters.summary import collect, job_window, render
    from srt_exporters.viewer import open_source

    with open_source(job, binary) as source, PromClient(source.url) as client:
        for warning in source.warnings:
            sys.stderr.write(f"srt metrics: warning: {warning}\n")
        if promql is not None:
            try:
                data = client.query_raw(promql, job_window(job).at)
            except PromError as exc:
                raise click.ClickException(query_error(promql, exc)) from None
            click.echo(json.dumps(data, indent=2) if as_json else _query_text(data), nl=as_json)
            return
        if plot_out is not None:
            from srt_exporters.plot import PlotError, plot

            try:
                panels = plot(client, job, job_window(job), plot_out)
            except PlotError as exc:
                raise click.ClickException(str(exc)) from None
            sys.stderr.write(f"srt metrics: {panels} panel(s) written to {plot_out}\n")
            if not as_json:
                return
        report = collect(client, job, source.live, source.url)
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(render(report), nl=False)


def query_error(promql: str, exc: Exception) -> str:
    """Prometheus's refusal of ``--query``, said as what is wrong with the query."""
    from srt_exporters.promapi import PromError

    text = str(exc)
    kind = exc.kind if isinstance(exc, PromError) else None
    text = text.removeprefix(f"{kind}: ").replace('invalid parameter "query": ', "")
    if kind == "bad_data":
        return f"--query {promql!r} is not valid PromQL: {text}"
    if kind in ("execution", "timeout", "canceled", "internal"):
        return f"--query {promql!r} failed while Prometheus evaluated it ({kind}): {text}"
    return f"--query {promql!r} failed: {text}"


def _query_text(data: dict[str, object]) -> str:
    """An instant query's result as one line per series: ``{labels} value``."""
    kind = data.get("resultType")
    result = data.get("result")
    if kind in ("scalar", "string") and isinstance(result, list):
        return f"{result[1]}\n"
    lines = []
    for r in result if isinstance(result, list) else []:
        labels = ", ".join(f'{k}="{v}"' for k, v in sorted(r.get("metric", {}).items()))
        if "value" in r:
            lines.append(f"{{{labels}}} {r['value'][1]}")
        else:
            values = " ".join(f"{v}@{t}" for t, v in r.get("values", []))
            lines.append(f"{{{labels}}} {values}")
    return "\n".join(lines) + "\n" if lines else "(no series)\n"
