"""srt-oarbank's hook implementations: the ``oarbank`` kind, its probes, ``srt oarbank``,
and the admissions section of ``srt status``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    import click
    from srt_services.extend import Probe, ServiceKind, StatusSection


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from srt_oarbank.srt.kind import OarbankKind

    return [OarbankKind]


@hookimpl
def srt_register_probes() -> list[type[Probe]]:
    from srt_oarbank.srt.probes import OarbankAgentProbe, OarbankProbe, OarbankReadyProbe

    return [OarbankReadyProbe, OarbankProbe, OarbankAgentProbe]


@hookimpl
def srt_cli_commands() -> list[click.Command]:
    from srt_oarbank.srt.cli import oarbank

    return [oarbank]


@hookimpl
def srt_status_sections(job_dir: str) -> list[StatusSection]:
    from srt_oarbank.srt.status import sections

    return sections(job_dir)
