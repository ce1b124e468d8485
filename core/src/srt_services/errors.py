"""Exception roots shared by every layer.

The CLI maps these to exit codes: :class:`RecipeInvalid` (and subclasses) to 2, any other
:class:`SrtError` to 1. Anything else escaping is a bug and keeps its traceback.
"""

from __future__ import annotations


class SrtError(Exception):
    """An expected failure whose message is meant for the user as is."""


class RecipeInvalid(SrtError):
    """The recipe (or something derived from it) cannot be run; nothing was started."""


class PluginError(SrtError):
    """A plugin could not be loaded or broke a rule of the plugin contract."""


class JobFailed(SrtError):
    """A job ran and failed; ``exit_code`` is what ``srt run`` exits with."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code
