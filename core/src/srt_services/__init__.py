"""srt: launch and supervise the long-running services of LLM-inference jobs.

The package root stays import-light on purpose: ``srt --help`` imports it, and so does every
plugin that only wants :data:`hookimpl`. Heavy layers (pydantic models, the planner, the
runtime) are imported by the commands that need them.
"""

from __future__ import annotations

__version__ = "1.0.0"

# not ``typing``'s: every node agent imports this package first, and typing costs ~10 ms
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    import pluggy

    hookimpl: pluggy.HookimplMarker

__all__ = ["__version__", "hookimpl"]


def __getattr__(name: str) -> Any:
    # ``hookimpl`` is resolved lazily so that importing the package for ``--version`` does not
    # pay for pluggy; plugin modules still write ``from srt_services import hookimpl``.
    if name == "hookimpl":
        from srt_services.hookspecs import hookimpl

        return hookimpl
    raise AttributeError(name)
