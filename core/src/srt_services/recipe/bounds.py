"""Limits on what a recipe's text may cost before any model is built.

* Size: :data:`MAX_RECIPE_BYTES` (16 MiB by default, ``SRT_MAX_RECIPE_BYTES`` to change
  it). Real recipes are a few KiB; the 10,000-service benchmark recipe is 3.5 MB of YAML
  (4.7 MB as JSON). A larger file is refused before it is parsed.
* Duplicate keys in JSON: orjson keeps the last one silently, YAML refuses them;
  :func:`json_has_duplicate_keys` tells the loader to take the YAML path, which names the
  key and its line.
* NUL in a string: no argv word, path or value can carry one (``execve`` would refuse it
  at launch time); :func:`nul_path` finds the first one so the load fails instead.
"""

from __future__ import annotations

import os
import re
from typing import Any

DEFAULT_MAX_RECIPE_BYTES = 16 * 1024 * 1024


def _max_bytes() -> int:
    try:
        value = int(os.environ.get("SRT_MAX_RECIPE_BYTES", ""))
    except ValueError:
        return DEFAULT_MAX_RECIPE_BYTES
    return value if value > 0 else DEFAULT_MAX_RECIPE_BYTES


MAX_RECIPE_BYTES = _max_bytes()

#: A JSON string token followed by a colon: a key. Matching from left to right consumes
#: every string whole, so a quote inside a string never starts a false match.
_JSON_KEY = re.compile(rb'"(?:[^"\\]|\\.)*"\s*:')
#: How a NUL can be written in YAML or JSON text (a raw NUL byte is refused by the parsers).
_NUL_ESCAPES = ("\\0", "\\x00", "\\u0000", "\\U00000000", "\x00")


def _count_keys(data: Any) -> int:
    count = 0
    todo = [data]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            count += len(item)
            todo.extend(item.values())
        elif isinstance(item, list):
            todo.extend(item)
    return count


def json_has_duplicate_keys(text: str, data: Any) -> bool:
    """Whether the JSON ``text`` (parsed as ``data``) wrote a key twice in one object."""
    return len(_JSON_KEY.findall(text.encode())) != _count_keys(data)


def nul_path(text: str, data: Any) -> tuple[str | int, ...] | None:
    """The path of the first string (or key) of ``data`` holding a NUL, if any."""
    if not any(e in text for e in _NUL_ESCAPES):
        return None
    todo: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while todo:
        path, item = todo.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path
        elif isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and "\x00" in key:
                    return path
                todo.append(((*path, key), value))
        elif isinstance(item, list):
            todo.extend(((*path, i), v) for i, v in enumerate(item))
    return None
