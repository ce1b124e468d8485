"""Test helpers for srt and for plugin authors (extra ``srt-services[testing]``).

``survivors`` and ``jobs`` run real jobs and prove nothing of them is left behind; the pytest
plugin (``srt_services.testing.pytest_plugin``) adds the plugin-author fixtures and contract
suites. Enable it with ``pytest_plugins = ["srt_services.testing.pytest_plugin"]``.
"""
