"""Environment layering for workers and frontends (doc §5 "Worker environment").

Later layers win, and the key keeps the position of its first export (srtctl builds a dict and
exports it in order). Each variable remembers who set it, as the oracle's `env_sources` does, so
a reviewer can tell a recipe value from one srtctl forces.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SRTCTL = "srtctl"
OVERRIDES_RECIPE = "srtctl (overrides recipe value)"
DEFAULT_DYN_LOG = "info,dynamo_runtime::pipeline::network::ingress::push_handler=warn"

_TEMPLATE = re.compile(r"\{(node|node_id)\}")


class EnvBuilder:
    """An ordered environment with a source label per variable."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.sources: dict[str, str] = {}

    def set(self, key: str, value: str, source: str = SRTCTL) -> None:
        previous = self.sources.get(key)
        if source == SRTCTL and previous is not None and previous.startswith("recipe:"):
            source = OVERRIDES_RECIPE
        self.env[key] = value
        self.sources[key] = source

    def setdefault(self, key: str, value: str, source: str = SRTCTL) -> None:
        if key not in self.env:
            self.set(key, value, source)

    def update(self, values: Mapping[str, str], source: str) -> None:
        for key, value in values.items():
            self.set(key, value, source)


def expand_node_templates(value: str, node: str, node_id: int) -> str:
    """`{node}` / `{node_id}` in mode env values; any other `{x}` stays as written."""
    return _TEMPLATE.sub(lambda m: node if m.group(1) == "node" else str(node_id), value)
