"""{{dist}}'s hook implementations: the module the ``srt.plugins`` entry point names.

srt imports this module only when a recipe needs ``type: {{kind}}`` (see ``srt.provides`` in
pyproject.toml), and it may be imported on a login node over NFS: keep it tiny and import
the kind (pydantic and all) inside the hook.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import ServiceKind


@hookimpl
def srt_register_service_kinds() -> list[type[ServiceKind]]:
    from {{package}}.kind import {{Class}}

    return [{{Class}}]
