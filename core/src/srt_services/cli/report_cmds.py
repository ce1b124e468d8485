"""``srt report``: one self-contained HTML page about a job (see :mod:`.report_page`)."""

from __future__ import annotations

import os

import rich_click as click

from srt_services.cli.job_args import JOB_DIR, root_option


@click.command()
@click.argument("job_dir", required=False, type=JOB_DIR)
@root_option
@click.option(
    "-o",
    "--output",
    "out",
    type=click.Path(dir_okay=False, writable=True),
    help="Where to write the page (default: JOBDIR/report.html; '-' for stdout).",
)
def report(job_dir: str | None, out: str | None) -> None:
    """Write a job's report: one HTML page that opens offline, without network.

    It holds a timeline of every instance on every node (launched, ready, restarts, exits,
    the stop and its cause, the phases), the plan (units, nodes, ports), the last lines of
    the log of whatever failed, and what plugins add (srt-exporters: the metrics charts
    when metrics were recorded). Without JOBDIR: the latest job under the job root.
    """
    from srt_services.app import compose
    from srt_services.app.report import build_report
    from srt_services.cli.job_cmds import pick_job_dir
    from srt_services.cli.report_page import render_page
    from srt_services.jobdir.layout import atomic_write

    path = pick_job_dir(job_dir, "report")
    page = render_page(build_report(path, compose.setup().plugins))
    if out == "-":
        click.echo(page, nl=False)
        return
    target = out or os.path.join(path, "report.html")
    atomic_write(target, page.encode())
    click.echo(target)
