"""The core's own plugin: the built-ins, registered through the public hooks.

Keeping the built-ins on the same path as third-party plugins means there is one code path
to test, and a plugin author can read this module as the smallest complete example.

It sits above the layers whose classes it registers (kinds, placements, probes, launchers)
and beside the composition root, which hands it to the plugin set: the plugins package
never imports it (:data:`srt_services.plugins.loading.CORE_PLUGIN` names it for a set made
without one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.hookspecs import hookimpl

if TYPE_CHECKING:
    from srt_services.contracts.expansion import Expansion
    from srt_services.contracts.kind import ServiceKind
    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.placement import Placement
    from srt_services.contracts.probe import Probe


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from srt_services.kinds.generic import GenericKind

    return [GenericKind]


@hookimpl
def srt_register_placements() -> list[type[Placement]]:
    from srt_services.plan.placements import BUILTIN_PLACEMENTS

    return BUILTIN_PLACEMENTS


@hookimpl
def srt_register_expansions() -> list[type[Expansion]]:
    from srt_services.plan.expansions import BUILTIN_EXPANSIONS

    return BUILTIN_EXPANSIONS


@hookimpl
def srt_register_probes() -> list[type[Probe]]:
    from srt_services.probes.file import FileProbe
    from srt_services.probes.http import HttpProbe
    from srt_services.probes.log import LogProbe
    from srt_services.probes.tcp import TcpProbe

    return [TcpProbe, HttpProbe, LogProbe, FileProbe]


@hookimpl
def srt_register_launchers() -> list[type[Launcher]]:
    from srt_services.launch.local import LocalLauncher
    from srt_services.launch.slurm.launcher import SlurmLauncher

    return [LocalLauncher, SlurmLauncher]
