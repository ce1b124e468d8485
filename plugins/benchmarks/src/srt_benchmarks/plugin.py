"""srt-benchmarks' hook implementation (import-light: the kinds load on first use)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from srt_services.extend import hookimpl

if TYPE_CHECKING:
    from srt_services.extend import BenchmarkKind


@hookimpl
def srt_register_benchmarks() -> list[type[BenchmarkKind]]:
    from srt_benchmarks.kinds import KINDS

    return list(KINDS)
