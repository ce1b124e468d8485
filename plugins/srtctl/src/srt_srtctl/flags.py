"""Reading srtctl's ``*_config`` mappings, whose keys come in two spellings.

srtctl accepts ``served-model-name`` and ``served_model_name`` alike; the format reads such a
key (the served model name rule, doc §3) under either. Turning a config into flags is the
engines' business, not the format's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def lookup(config: Mapping[str, Any] | None, key: str) -> Any:
    """A config value under either spelling (`served-model-name` / `served_model_name`)."""
    if not config:
        return None
    for candidate in (key, key.replace("-", "_"), key.replace("_", "-")):
        if candidate in config:
            return config[candidate]
    return None
