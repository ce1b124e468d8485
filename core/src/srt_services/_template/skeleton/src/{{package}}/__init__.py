"""{{dist}}: the ``{{kind}}`` service kind for srt."""

__version__ = "0.1.0"
