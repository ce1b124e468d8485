"""Options to command-line flags and back: the benchmark's argv shows every setting.

The plan carries the options as ``--name value`` words (``concurrencies`` in srtctl's
``AxB`` form), which reads like srtctl's ``bench.sh`` line in ``srt dry-run`` and needs no
file next to the command. The runner parses them back through the same options model, so
what it runs is exactly what the recipe said: :func:`to_argv` and :func:`from_argv` are
inverse (a property the tests fuzz).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel


def _word(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "x".join(str(v) for v in value)
    return str(value)


def to_argv(options: BaseModel) -> list[str]:
    """``--key value`` for every option set to something other than ``None``."""
    out: list[str] = []
    for name in type(options).model_fields:
        value = getattr(options, name)
        if value is None:
            continue
        out += [f"--{name.replace('_', '-')}", _word(value)]
    return out


def from_argv(model: type[BaseModel], argv: Sequence[str]) -> BaseModel:
    """The options the words of :func:`to_argv` stand for, checked by ``model``."""
    if len(argv) % 2:
        raise ValueError(f"expected --key value pairs, got {list(argv)}")
    raw: dict[str, Any] = {}
    for key, value in zip(argv[::2], argv[1::2], strict=True):
        if not key.startswith("--"):
            raise ValueError(f"expected a --key, got {key!r}")
        name = key[2:].replace("-", "_")
        if name not in model.model_fields:
            raise ValueError(f"unknown option {key}")
        raw[name] = value
    # the words are text: let the model convert them (the recipe itself is read strictly)
    return model.model_validate(raw, strict=False)
