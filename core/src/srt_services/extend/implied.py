"""What an ``srt_implied_services`` implementation returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ImpliedService:
    """A service the recipe implies: the entry a user would have written, plus why.

    ``reason`` is shown by dry-run as ``implied by: <reason>``; write it in terms of the
    recipe (``frontend.type dynamo``), so the user knows what to change to drop it.
    """

    entry: dict[str, Any]
    reason: str
    #: Suppress it when any declared service has one of these types (under any name), the
    #: way a declared ``lmcache-server`` of any name replaces the implied one.
    unless_type_declared: tuple[str, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return str(self.entry["name"])
