"""srt-exporters' hook implementations.

Kept tiny and import-light: srt imports this module only when a recipe needs one of the
kinds or a hook, and the kind modules (pydantic and all) only when a hook is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    import click
    from srt_services.extend import ImpliedService, Problem, Recipe, ReportSection, ServiceKind


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from srt_exporters.kind import DcgmExporterKind, NodeExporterKind, ProcessExporterKind
    from srt_exporters.prometheus import PrometheusKind

    return [NodeExporterKind, ProcessExporterKind, DcgmExporterKind, PrometheusKind]


@hookimpl
def srt_implied_services(recipe: Recipe) -> list[ImpliedService]:
    from srt_exporters.implied import implied

    return implied(recipe)


@hookimpl
def srt_validate_recipe(recipe: Recipe) -> list[Problem]:
    # a generic service in an upstream exporter image: its command must be the image's
    from srt_exporters.images import generic_image_problems

    return generic_image_problems(recipe)


@hookimpl
def srt_cli_commands() -> list[click.Command]:
    from srt_exporters.cli import metrics

    return [metrics]


@hookimpl
def srt_report_sections(job_dir: str) -> list[ReportSection]:
    from srt_exporters.report import sections

    return sections(job_dir)
