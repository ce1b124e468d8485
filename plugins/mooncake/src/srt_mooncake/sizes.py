"""Memory sizes as Mooncake writes them (``256MB``, ``100gb``, ``3355443200``).

Recipes give sizes the way Mooncake's own config and environment do, so they are read with
Mooncake's rules (binary units, case-insensitive, ``b`` optional after the unit letter) but
at load time: a typo such as ``100gn`` is an error naming the recipe line instead of a store
that dies at start-up on a node far away. Files srt writes carry the byte count, which
every Mooncake client reads (older vLLM connectors read nothing else).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, WithJsonSchema

_UNITS = (
    ("kb", 1024),
    ("mb", 1024**2),
    ("gb", 1024**3),
    ("tb", 1024**4),
    ("k", 1024),
    ("m", 1024**2),
    ("g", 1024**3),
    ("t", 1024**4),
    ("b", 1),
)


def to_bytes(value: Any) -> int:
    """A size in bytes; ``ValueError`` (a message pydantic shows as is) when it is none."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"must be a byte count or a size such as '256MB', got {value!r}")
    if isinstance(value, int):
        number = float(value)
    else:
        text = value.strip().lower()
        scale = 1
        for unit, factor in _UNITS:
            if text.endswith(unit):
                text, scale = text[: -len(unit)].strip(), factor
                break
        try:
            number = float(text) * scale
        except ValueError:
            raise ValueError(
                f"must be a byte count or a size such as '256MB' or '100gb' (units kb, mb, gb,"
                f" tb, 1024-based), got {value!r}"
            ) from None
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"must be a size of 0 bytes or more, got {value!r}")
    return int(number)


#: A size option: an int of bytes or a Mooncake size string, held as bytes.
Size = Annotated[
    int,
    BeforeValidator(to_bytes),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "examples": ["256MB", "100gb"]},
            ]
        }
    ),
]
