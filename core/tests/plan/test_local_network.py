"""Where a local job's network mode comes from: ``srt run --local-network``, else the
site's ``[local] network``, else ``auto``; and what is refused before anything starts.

(The plans of a real collision, two Mooncake stores at one port on two nodes, and their
runs are in plugins/mooncake/tests/test_mooncake_netns.py: core has no kind that binds a
wildcard address.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from srt_services.errors import SrtError
from srt_services.site_config import SiteConfig, SiteConfigError, parse
from srt_services.testing import kit
from srt_services.testing.jobs import run_srt

RECIPE = """\
schema: 2
name: one
observability: {metrics: false}
frontend: {type: sglang, command: [sleep, "1"]}
roles: {agg: {command: [sleep, "1"]}}
"""


@pytest.mark.parametrize("mode", ["auto", "shared", "namespaces"])
def test_the_site_names_a_mode(mode: str) -> None:
    assert parse({"local": {"network": mode}}, "site.toml").local_network == mode
    assert parse({}, "site.toml").local_network == "auto"


@pytest.mark.parametrize("value", ["bridge", "", 1, None])
def test_another_site_value_is_refused_naming_the_key(value: object) -> None:
    with pytest.raises(SiteConfigError, match=r"local\.network must be one of auto, shared"):
        parse({"local": {"network": value}}, "site.toml")
    with pytest.raises(SiteConfigError, match=r"unknown key local\.mode"):
        parse({"local": {"mode": "shared"}}, "site.toml")


def test_the_flag_wins_over_the_site_and_the_site_over_auto(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugins = kit.isolated_plugins()
    site = SiteConfig(path="/etc/srt/site.toml", local_network="shared")
    plan = kit.plan(plugins, RECIPE, runs_here=True, job_dir="/j", site=site, local_network=None)
    assert plan.local_network is not None
    assert (plan.local_network.mode, plan.local_network.why) == ("shared", "requested")
    # the site asks for namespaces where none can be made (no ip, no nsenter): refused
    monkeypatch.setenv("PATH", str(tmp_path))
    site = SiteConfig(path="/etc/srt/site.toml", local_network="namespaces")
    with pytest.raises(SrtError) as info:
        kit.plan(plugins, RECIPE, runs_here=True, job_dir="/j", site=site, local_network=None)
    assert str(info.value) == (
        "[local] network in /etc/srt/site.toml asks for network namespaces per virtual node,"
        " but ip and nsenter are not on PATH"
    )
    # the flag says shared: nothing to look at
    plan = kit.plan(
        plugins, RECIPE, runs_here=True, job_dir="/j", site=site, local_network="shared"
    )
    assert plan.local_network is not None and plan.local_network.mode == "shared"
    # auto with nothing colliding: shared, whatever the machine allows
    plan = kit.plan(plugins, RECIPE, runs_here=True, job_dir="/j", local_network="auto")
    assert plan.local_network is not None and plan.local_network.mode == "shared"
    assert [n.ip for n in plan.nodes] == ["127.0.0.1"]


def test_a_plan_for_a_cluster_has_no_local_network() -> None:
    plan = kit.plan(kit.isolated_plugins(), RECIPE)
    assert plan.local_network is None


def test_srt_run_refuses_impossible_namespaces_before_anything_starts(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    job = tmp_path / "job"
    empty = tmp_path / "bin"
    empty.mkdir()
    done = run_srt(
        "run",
        str(recipe),
        "--job-dir",
        str(job),
        "--local-network",
        "namespaces",
        env={"PATH": str(empty), "SRT_SITE_CONFIG": os.devnull},
    )
    assert done.returncode != 0
    assert (
        "--local-network asks for network namespaces per virtual node, but ip and nsenter"
        " are not on PATH" in done.stderr
    )
    # refused before the plan was written: nothing started, nothing logged
    assert not (job / "state.json").exists() and not (job / "plan.json").exists()
    assert not list((job / "logs").iterdir())
