"""``generic``: launches exactly what the recipe wrote."""

from __future__ import annotations

from typing import ClassVar

from srt_services.contracts.kind import ServiceKind


class GenericKind(ServiceKind):
    name: ClassVar[str] = "generic"
    summary: ClassVar[str] = "Runs the recipe's command as written; no defaults."
    requires_command: ClassVar[bool] = True
