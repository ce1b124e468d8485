"""srt-lmcache: the ``lmcache-server`` service kind for srt (LMCache's multi-process server,
implied by vLLM's ``lmcache-mp`` connector)."""

__version__ = "1.0.0"
