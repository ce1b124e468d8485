"""srt-ray: the ``ray`` service kind for srt (one Ray cluster over a service's nodes)."""

__version__ = "1.0.0"
