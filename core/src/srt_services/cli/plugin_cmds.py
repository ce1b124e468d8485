"""``srt plugins``: what is installed, what loaded, and the site's pinned set."""

from __future__ import annotations

import rich_click as click


@click.group()
def plugins() -> None:
    """Inspect installed plugins and check them against the site's rules."""
