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
    #: Where it goes among the implied services, which launch before the declared ones in
    #: this order within their phase (ties keep pluggy's call order). The spec's order:
    #: the discovery plane (etcd 10, nats 20), the per-worker GPU Memory Service (30),
    #: caches (LMCache 40), then observability (exporters 60, the scraper 70). A
    #: third-party kind picks its place relative to these.
    order: int = 100

    @property
    def name(self) -> str:
        return str(self.entry["name"])
