"""A mistyped ``type:`` is answered with the kind meant, wherever it comes from: a kind a
plugin declares but that was never imported (nobody asked for it yet), or a first-party
kind whose plugin is not installed."""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

import pytest
from plugin_site import Site
from srt_services.plugins import manager
from srt_services.plugins.manager import UnknownName


def test_a_typo_of_a_kind_from_a_plugin_not_imported_yet_is_answered(
    site: Site, plugin_set: Callable[..., manager.PluginSet]
) -> None:
    site.install("good")
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind("good-knd")
    text = str(err.value)
    assert "did you mean 'good-kind'?" in text
    assert "good-kind" in text.split("(known: ")[1].split(")", maxsplit=1)[0]
    assert site.imported() == [], "a hint must not import the plugin"


def _not_installed() -> tuple[str, str]:
    """A first-party kind (longer than four letters) whose plugin this environment lacks."""
    for kind, dist in sorted(manager.FIRST_PARTY_KINDS.items()):
        if dist in manager.CORE_EXTRAS or len(kind) < 5:
            continue
        try:
            metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            return kind, dist
    pytest.skip("every first-party plugin is installed here")


def test_a_typo_of_a_first_party_kind_that_is_not_installed_says_what_to_install(
    site: Site, plugin_set: Callable[..., manager.PluginSet]
) -> None:
    kind, dist = _not_installed()
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind(kind[:-1])
    assert (
        f"did you mean {kind!r}? (provided by {dist}, which is not installed: pip install {dist})"
    ) in str(err.value)


def test_an_exact_first_party_name_is_not_a_typo(
    site: Site, plugin_set: Callable[..., manager.PluginSet]
) -> None:
    kind, dist = _not_installed()
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind(kind)
    text = str(err.value)
    assert "did you mean" not in text
    assert f"it is provided by {dist}, which is not installed: pip install {dist}" in text
