"""Config dicts to command-line flags, the way srtctl renders `*_config.<mode>` (doc §6).

Engines parse these argv lists, so the rendering has to be srtctl's exactly: sorted keys, `_`
becomes `-`, `true` a bare flag, `false`/null dropped, lists as separate items, anything else
`str(value)` (so a nested dict becomes a Python repr, as in srtctl). Duplicates are kept: the
engine's own parser decides which occurrence wins, and we must not decide differently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def flag_name(key: str) -> str:
    return "--" + key.replace("_", "-")


def render_value(value: Any) -> str:
    """`str()` as Python gives it, which is what srtctl passes (True -> 'True', dict -> repr)."""
    return str(value)


def config_to_flags(config: Mapping[str, Any] | None, drop: Iterable[str] = ()) -> list[str]:
    """Sorted `--key value` argv items; keys in `drop` (either spelling) are left out."""
    if not config:
        return []
    dropped = {d.replace("_", "-") for d in drop}
    argv: list[str] = []
    for key in sorted(config):
        value = config[key]
        name = key.replace("_", "-")
        if name in dropped or value is None or value is False:
            continue
        if value is True:
            argv.append("--" + name)
        elif isinstance(value, list):
            argv.append("--" + name)
            argv.extend(render_value(v) for v in value)
        else:
            argv.extend(["--" + name, render_value(value)])
    return argv


def verbatim_args(args: Mapping[str, Any] | None) -> list[str]:
    """`frontend.args`: keys used as written (no `_`->`-`, not sorted); true bare, false dropped."""
    if not args:
        return []
    argv: list[str] = []
    for key, value in args.items():
        if value is None or value is False:
            continue
        if value is True:
            argv.append(f"--{key}")
        else:
            argv.extend([f"--{key}", render_value(value)])
    return argv


def lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    """A config value under either spelling (`served-model-name` / `served_model_name`)."""
    if not config:
        return None
    for candidate in (key, key.replace("-", "_"), key.replace("_", "-")):
        if candidate in config:
            return config[candidate]
    return None
