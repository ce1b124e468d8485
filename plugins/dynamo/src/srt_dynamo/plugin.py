"""srt-dynamo's hook implementations (import-light: the engine module loads on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import Engine


@hookimpl
def srt_register_engines() -> list[type[Engine]]:
    from srt_dynamo.engine import DynamoEngine

    return [DynamoEngine]
