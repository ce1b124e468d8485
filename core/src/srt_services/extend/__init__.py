"""Interfaces plugins implement: service kinds, probes, placements, expansions, launchers.

These are the classes the registration hooks in :mod:`srt_services.hookspecs` return
subclasses of. They are documented in ``docs/plugins.md`` and ``docs/plugin-authors.md``.
"""
