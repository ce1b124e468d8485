"""What an ``srt_report_sections`` implementation returns: a part of ``srt report``'s page."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReportSection:
    """One section of a job's report page, below core's own (timeline, plan, logs).

    ``html`` is inserted into the page as it is: the plugin is trusted code, but what it
    shows comes from the job (names, labels, log lines), so it must escape every such
    string (``html.escape``). The page is opened offline and under a Content-Security-Policy
    that forbids fetching anything and runs only core's own script: inline ``<svg>``, inline
    ``style`` attributes and ``data:`` images work; ``<script>``, external images, fonts
    and stylesheets do not.
    """

    #: the section's heading (plain text: core escapes it)
    title: str
    #: an HTML fragment (a ``<div>``, ``<svg>``, ``<table>``...), escaped by the plugin
    html: str
    #: where it goes among the plugins' sections (ties keep pluggy's call order)
    order: int = 100
