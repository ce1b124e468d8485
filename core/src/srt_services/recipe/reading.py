"""Reading a recipe's text: a file or standard input, bounded and UTF-8, or a located error.

Recipes are small: a larger file is a mistake (or an attack on the parser), refused before
it is parsed (see :mod:`.bounds`).
"""

from __future__ import annotations

import os
import sys

from srt_services.recipe import bounds
from srt_services.recipe.problems import LocatedProblem, RecipeError

MAX_RECIPE_BYTES = bounds.MAX_RECIPE_BYTES
#: How a recipe read from standard input (``-``) is named in messages.
STDIN = "<stdin>"


def source_name(path: str) -> str:
    """How the recipe at ``path`` is named in messages (``-`` is standard input)."""
    return STDIN if path == "-" else path


def read_text(path: str) -> str:
    """The recipe file's text; ``-`` reads standard input (shown as ``<stdin>``)."""
    if path == "-":
        return _decoded(STDIN, sys.stdin.buffer.read(MAX_RECIPE_BYTES + 1))
    try:
        size = os.path.getsize(path)
        if size > MAX_RECIPE_BYTES:
            raise _too_big(path, f"is {size} bytes; refusing more than {MAX_RECIPE_BYTES}")
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise RecipeError(path, [LocatedProblem("", "no such file")]) from None
    except IsADirectoryError:
        raise RecipeError(path, [LocatedProblem("", "is a directory, not a recipe file")]) from None
    except OSError as exc:
        raise RecipeError(path, [LocatedProblem("", f"cannot read: {exc.strerror}")]) from None
    return _decoded(path, raw)


def _too_big(source: str, what: str) -> RecipeError:
    return RecipeError(source, [LocatedProblem("", f"recipe {what}")])


def _decoded(source: str, raw: bytes) -> str:
    if len(raw) > MAX_RECIPE_BYTES:  # only stdin gets here: a file's size is known first
        raise _too_big(source, f"is more than {MAX_RECIPE_BYTES} bytes; refusing it")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RecipeError(
            source, [LocatedProblem("", f"is not UTF-8 text (byte {exc.start})")]
        ) from None
