"""Discovery, controls and statuses, in-process over real dist-info directories."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.requirements import InvalidRequirement, Requirement
from plugin_site import Site
from srt_services import __version__
from srt_services.errors import PluginError
from srt_services.plugins.discovery import PluginRecord, _core_specifier, scan
from srt_services.plugins.manager import PluginSet, UnknownName

MakeSet = Callable[..., PluginSet]


def record(plugins: PluginSet, dist: str) -> PluginRecord:
    for r in plugins.records:
        if r.key == dist:
            return r
    raise AssertionError(f"{dist} not discovered: {[r.dist for r in plugins.records]}")


# --------------------------------------------------------------------------- scan


def test_scan_reads_only_entry_points(site: Site) -> None:
    site.install("good", "oldcore")
    found = {r.key: r for r in scan()}
    good = found["srt-good"]
    assert (good.version, good.module) == ("1.2.0", "srt_good.plugin")
    assert good.provides == {"kind": ["good-kind"], "command": ["good-hello"]}
    assert str(site.path) == good.location
    # METADATA (Requires-Dist) is read only right before import.
    assert not good.metadata_read
    assert good.core_requirement is None
    old = found["srt-oldcore"]
    old.read_metadata()
    assert old.core_requirement == "srt-services>=0.1,<1"


def test_a_kind_imports_only_the_plugin_declaring_it(site: Site, plugin_set: MakeSet) -> None:
    site.install("good", "dupa", "blockme", "quiet", "broken")
    plugins = plugin_set()
    assert plugins.kind("good-kind").name == "good-kind"
    assert site.imported() == ["srt_good"]
    assert record(plugins, "srt-dupa").status == "discovered"


def test_an_undeclared_name_loads_the_plugins_that_declare_nothing(
    site: Site, plugin_set: MakeSet
) -> None:
    site.install("good", "quiet")
    plugins = plugin_set()
    assert plugins.kind("quiet-kind").name == "quiet-kind"
    assert site.imported() == ["srt_quiet"]


def test_builtin_names_need_no_plugin_import(site: Site, plugin_set: MakeSet) -> None:
    site.install("good", "quiet", "broken")
    plugins = plugin_set()
    assert plugins.kind("generic").name == "generic"
    assert site.imported() == []


# --------------------------------------------------------------------------- statuses


def test_plugin_raising_on_import_is_failed_and_named(site: Site, plugin_set: MakeSet) -> None:
    site.install("broken", "good")
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind("broken-kind")
    message = str(err.value)
    assert "srt-broken 0.1.0" in message
    assert "failed" in message
    assert "RuntimeError: srt-broken cannot start" in message
    broken = record(plugins, "srt-broken")
    assert broken.status == "failed"
    assert broken.error == "RuntimeError: srt-broken cannot start: missing libfoo"
    # The rest keeps working.
    assert plugins.kind("good-kind").name == "good-kind"


def test_incompatible_core_range_is_never_imported(site: Site, plugin_set: MakeSet) -> None:
    site.install("oldcore")
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind("old-kind")
    assert "srt-oldcore 0.5.0" in str(err.value)
    assert "incompatible" in str(err.value)
    assert f"srt-services<1,>=0.1 but this is srt-services {__version__}" in str(err.value)
    assert record(plugins, "srt-oldcore").status == "incompatible"
    assert site.imported() == []


def test_duplicate_kind_names_both_owners(site: Site, plugin_set: MakeSet) -> None:
    site.install("dupa", "dupb")
    plugins = plugin_set()
    with pytest.raises(PluginError) as err:
        plugins.kind("dup-kind")
    assert "srt-dupa 1.0.0" in str(err.value)
    assert "srt-dupb 2.0.0" in str(err.value)
    plugins.load_all()
    assert record(plugins, "srt-dupa").problems == [
        "kind 'dup-kind' is also registered by srt-dupb 2.0.0"
    ]
    assert "dup-kind" not in plugins.kinds()


def test_duplicate_resolved_by_blocking_one(site: Site, plugin_set: MakeSet) -> None:
    site.install("dupa", "dupb")
    plugins = plugin_set(SRT_DISABLED_PLUGINS="srt-dupb")
    assert plugins.owner("kind", "dup-kind") is None
    plugins.kind("dup-kind")
    assert plugins.owner("kind", "dup-kind") == "srt-dupa 1.0.0"


def test_builtin_name_cannot_be_taken(site: Site, plugin_set: MakeSet) -> None:
    site.install("clash")
    plugins = plugin_set()
    plugins.load_all()
    clash = record(plugins, "srt-clash")
    assert clash.status == "failed"
    assert "srt-clash 1.0.0 registers kind 'generic'" in (clash.error or "")
    assert "srt-services (built-in)" in (clash.error or "")
    assert plugins.kind("generic").name == "generic"


def test_unknown_hook_is_quarantined_with_a_hint(site: Site, plugin_set: MakeSet) -> None:
    site.install("typo")
    plugins = plugin_set()
    plugins.load_all()
    typo = record(plugins, "srt-typo")
    assert typo.status == "failed"
    assert "srt_register_kinds (did you mean srt_register_service_kinds?)" in (typo.error or "")
    assert "typo-kind" not in plugins.names("kind")


def test_strict_mode_turns_a_failure_into_an_error(site: Site, plugin_set: MakeSet) -> None:
    site.install("broken")
    plugins = plugin_set(SRT_STRICT_PLUGINS="1")
    with pytest.raises(PluginError, match="strict"):
        plugins.kind("broken-kind")


# --------------------------------------------------------------------------- controls


@pytest.mark.parametrize(
    ("env", "status", "reason"),
    [
        ({"SRT_DISABLED_PLUGINS": "srt-blockme"}, "blocked", "SRT_DISABLED_PLUGINS"),
        # Names compare normalised; the entry-point name is an alias.
        ({"SRT_DISABLED_PLUGINS": "other, SRT_BlockMe"}, "blocked", "SRT_DISABLED_PLUGINS"),
        ({"SRT_PLUGINS": "srt-good"}, "not allowed", "not named in SRT_PLUGINS"),
        ({"SRT_PLUGINS": ""}, "not allowed", "not named in SRT_PLUGINS"),
        ({"SRT_DISABLE_PLUGIN_AUTOLOAD": "1"}, "not allowed", "SRT_DISABLE_PLUGIN_AUTOLOAD=1"),
        (
            {"SRT_DISABLE_PLUGIN_AUTOLOAD": "1", "SRT_PLUGINS": "srt-good"},
            "not allowed",
            "SRT_DISABLE_PLUGIN_AUTOLOAD=1",
        ),
    ],
)
def test_environment_controls_act_before_import(
    site: Site, plugin_set: MakeSet, env: dict[str, str], status: str, reason: str
) -> None:
    site.install("blockme", "good")
    plugins = plugin_set(**env)
    blockme = record(plugins, "srt-blockme")
    assert blockme.status == status
    assert reason in blockme.reason
    with pytest.raises(UnknownName) as err:
        plugins.kind("blocked-kind")
    assert f"srt-blockme 1.0.0, which is {status}" in str(err.value)
    assert reason in str(err.value)
    plugins.load_all()
    assert "srt_blockme" not in site.imported()


def test_autoload_off_loads_what_srt_plugins_names(site: Site, plugin_set: MakeSet) -> None:
    site.install("blockme", "good")
    plugins = plugin_set(SRT_DISABLE_PLUGIN_AUTOLOAD="1", SRT_PLUGINS="srt-good")
    plugins.load_all()
    assert record(plugins, "srt-good").status == "loaded"
    assert site.imported() == ["srt_good"]


def test_site_block_wins_over_srt_plugins(site: Site, plugin_set: MakeSet) -> None:
    site.install("blockme")
    site.write_config('[plugins]\nblock = ["srt-blockme"]\n')
    plugins = plugin_set(SRT_PLUGINS="srt-blockme")
    blockme = record(plugins, "srt-blockme")
    assert blockme.status == "blocked"
    assert f"plugins.block of the site config {site.config}" in blockme.reason


def test_site_allow_list(site: Site, plugin_set: MakeSet) -> None:
    site.install("blockme", "good")
    site.write_config('[plugins]\nallow = ["srt-good"]\n')
    plugins = plugin_set()
    assert record(plugins, "srt-good").status == "discovered"
    assert record(plugins, "srt-blockme").status == "not allowed"
    assert "plugins.allow" in record(plugins, "srt-blockme").reason


def test_site_require_refuses_another_version(site: Site, plugin_set: MakeSet) -> None:
    site.install("good")
    site.write_config('[plugins]\nrequire = ["srt-good>=2,<3", "srt-missing>=1"]\n')
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind("good-kind")
    assert "version 1.2.0 does not satisfy 'srt-good>=2,<3' in plugins.require" in str(err.value)
    assert site.imported() == []
    problems = dict(plugins.site_problems())
    assert "not installed" in problems["srt-missing"]
    assert "incompatible" in problems["srt-good 1.2.0"]


def test_missing_first_party_kind_says_what_to_install(
    site: Site, plugin_set: MakeSet, absent_first_party: tuple[str, str]
) -> None:
    kind, dist = absent_first_party
    plugins = plugin_set()
    with pytest.raises(UnknownName) as err:
        plugins.kind(kind)
    assert f"provided by {dist}, which is not installed" in str(err.value)


def test_site_lock_pins_versions_and_files(site: Site, plugin_set: MakeSet) -> None:
    from dataclasses import replace

    from srt_services.plugins.lockfile import lock_of, write_lock

    site.install("good", "dupa")
    lock = site.config.parent / "plugins.lock"
    write_lock(str(lock), lock_of([replace(r) for r in scan()], __version__))
    site.write_config('[plugins]\nlock = "plugins.lock"\n')
    plugins = plugin_set()
    plugins.kind("good-kind")
    assert record(plugins, "srt-good").status == "loaded"
    # Someone installs another plugin, upgrades one and edits an installed file of another
    # (RECORD untouched: an edit in place does not rewrite it).
    site.install("blockme")
    site.install_dist(replace(__import__("dummies").DUMMIES["dupa"], version="1.0.1"))
    module = site.path / "srt_good" / "plugin.py"
    module.write_text(module.read_text() + "\n# patched in place\n")
    plugins = plugin_set()
    blockme = record(plugins, "srt-blockme").reason
    assert "not in the lock file" in blockme
    assert f"run `srt plugins lock -o {lock}` to accept" in blockme
    assert "differs from 1.0.0 in the lock file" in record(plugins, "srt-dupa").reason
    with pytest.raises(UnknownName) as err:
        plugins.kind("good-kind")
    assert "its installed files differ from the lock file" in str(err.value)
    assert f"`srt plugins lock -o {lock}`" in str(err.value)
    assert site.imported() == ["srt_good"]  # only from the first, matching set


def test_site_autoload_off(site: Site, plugin_set: MakeSet) -> None:
    site.install("blockme", "good")
    site.write_config("[plugins]\nautoload = false\n")
    plugins = plugin_set()
    reason = record(plugins, "srt-good").reason
    assert record(plugins, "srt-good").status == "not allowed"
    assert f"autoload is off (plugins.autoload = false of the site config {site.config})" in reason
    plugins.load_all()
    assert site.imported() == []
    # Named in SRT_PLUGINS, a plugin loads; the site's other rules still hold.
    site.write_config('[plugins]\nautoload = false\nblock = ["srt-blockme"]\n')
    plugins = plugin_set(SRT_PLUGINS="srt-good,srt-blockme")
    plugins.load_all()
    assert record(plugins, "srt-good").status == "loaded"
    assert record(plugins, "srt-blockme").status == "blocked"
    site.write_config("[plugins]\nautoload = 0\n")
    from srt_services.site_config import SiteConfigError, load

    with pytest.raises(SiteConfigError, match=r"plugins\.autoload must be true or false"):
        load(str(site.config))


def test_site_config_refuses_a_malformed_requirement(site: Site) -> None:
    from srt_services.site_config import SiteConfigError, load

    site.write_config('[plugins]\nrequire = ["srt-good >= = 2"]\n')
    with pytest.raises(SiteConfigError, match="is not a requirement"):
        load(str(site.config))


# --------------------------------------------------------------------------- core range


_OPS = st.sampled_from(["~=", "===", "==", "!=", "<=", ">=", "<", ">", "=>", "="])
_VERSIONS = st.sampled_from(
    ["1", "1.0", "2", "1.0.*", "1.5.dev0", "0.1rc1", "abc", "1.0+local", ""]
)
_CLAUSE = st.tuples(st.sampled_from(["", " "]), _OPS, st.sampled_from(["", " "]), _VERSIONS).map(
    "".join
)
_REQUIREMENTS = st.tuples(
    st.sampled_from(["srt-services", "srt_services", "Srt.Services"]),
    st.sampled_from(["", " ", "[testing]", " ("]),
    st.lists(st.tuples(_CLAUSE, st.sampled_from([",", " , ", ",,"])), max_size=3).map(
        lambda cs: "".join(c + (sep if i < len(cs) - 1 else "") for i, (c, sep) in enumerate(cs))
    ),
    st.sampled_from(["", ")", " ; extra == 'x'", "; python_version >= '3'", " @ file:///x"]),
).map("".join)


@settings(max_examples=400, deadline=None)
@given(_REQUIREMENTS)
def test_core_range_reads_as_packaging_reads_it(text: str) -> None:
    """The plain form's fast path (``packaging.specifiers`` alone) and the full grammar
    agree on every requirement: the same specifier set, or both unreadable."""
    try:
        full: str | None = str(Requirement(text).specifier)
    except InvalidRequirement:
        full = None
    fast = _core_specifier(text)
    assert (None if fast is None else str(fast)) == full
