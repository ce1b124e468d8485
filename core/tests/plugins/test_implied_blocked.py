"""A setting that implies a service whose plugin is installed but blocked or not allowed:
the error says so (and why), instead of telling the user to install what is there.

The plugin is a real distribution named ``srt-gms`` written into a temporary site directory
(it registers a ``gms`` kind); it is never imported, since the site does not admit it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from distgen import plugin
from plugin_site import Site
from srt_services.testing import PluginSet, RecipeError, kit

MakeSet = Callable[..., PluginSet]

FAILOVER = (
    "schema: 2\nname: t\nengine: {type: vllm, failover: true}\n"
    "observability: {metrics: false}\nfrontend: {type: vllm, command: [f]}\n"
    "roles:\n  decode: {command: [w]}\n"
)


def failover_error(plugins: PluginSet) -> str:
    with pytest.raises(RecipeError) as info:
        kit.load(plugins, FAILOVER, "r.yaml")
    (problem,) = info.value.errors
    assert (problem.label, problem.line) == ("engine.failover", 3)
    return problem.message


def test_blocked_by_the_site_config(site: Site, plugin_set: MakeSet) -> None:
    site.install_dist(plugin("srt-gms", "1.0.0", kinds=["gms"]))
    site.write_config('[plugins]\nblock = ["srt-gms"]\n')
    message = failover_error(plugin_set())
    assert message.startswith(
        "true implies the gms service, whose kind srt-gms provides, but"
        " srt-gms 1.0.0 is blocked (listed in plugins.block of the site config"
    )
    assert message.endswith(
        ": allow it (SRT_PLUGINS, SRT_DISABLED_PLUGINS, the site config's plugins section),"
        " or set engine.failover: false"
    )
    assert "pip install" not in message
    assert site.imported() == []


def test_not_allowed_by_srt_plugins(site: Site, plugin_set: MakeSet) -> None:
    site.install_dist(plugin("srt-gms", "1.0.0", kinds=["gms"]))
    message = failover_error(plugin_set(SRT_PLUGINS="srt-good"))
    assert "srt-gms 1.0.0 is not allowed (not named in SRT_PLUGINS)" in message
    assert site.imported() == []


def test_metrics_default_names_a_blocked_exporters_plugin(site: Site, plugin_set: MakeSet) -> None:
    kinds = ["node-exporter", "dcgm-exporter", "process-exporter", "prometheus"]
    site.install_dist(plugin("srt-exporters", "1.0.0", kinds=kinds))
    site.write_config('[plugins]\nblock = ["srt-exporters"]\n')
    loaded = kit.load(plugin_set(), "schema: 2\nname: t\n", "r.yaml")
    (warning,) = loaded.warnings
    assert warning.message.startswith(
        "observability.metrics is on by default but srt-exporters 1.0.0 is blocked"
    )
    assert warning.message.endswith(
        "the job runs without exporters and Prometheus; allow it (SRT_PLUGINS,"
        " SRT_DISABLED_PLUGINS, the site config's plugins section), or set"
        " observability.metrics: false"
    )
