"""``srt plugins list/lock/check`` and recipe validation against plugin rules.

The ``srt plugins`` commands run in-process (``cli``) over a site directory of real dummy
distributions on ``sys.path``; whatever must hold for a whole ``srt`` process (``--help``
imports nothing, a recipe fails before anything starts) runs ``srt`` in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result
from plugin_site import Site

Run = Callable[..., subprocess.CompletedProcess[str]]
Cli = Callable[..., Result]

ALL_STATUSES_CONFIG = """
[plugins]
block = ["srt-blockme"]
allow = ["srt-good", "srt-broken", "srt-oldcore", "srt-blockme", "srt-dupa", "srt-dupb"]
"""


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in rows}


def test_list_shows_every_status_with_a_broken_plugin_installed(site: Site, cli: Cli) -> None:
    site.install("good", "broken", "oldcore", "blockme", "quiet", "dupa", "dupb")
    site.write_config(ALL_STATUSES_CONFIG)
    result = cli("list", "--json")
    assert result.exit_code == 0, result.output
    rows = by_name(json.loads(result.stdout))
    assert "srt-services" not in rows
    good = rows["srt-good"]
    assert good["status"] == "loaded"
    assert good["version"] == "1.2.0"
    assert good["location"] == str(site.path)
    assert good["registered"] == {"command": ["good-hello"], "kind": ["good-kind"]}
    assert good["hooks"] == ["srt_cli_commands", "srt_register_service_kinds"]
    assert good["core_requirement"] == "srt-services>=1.0,<2"
    broken = rows["srt-broken"]
    assert broken["status"] == "failed"
    assert broken["error"] == "RuntimeError: srt-broken cannot start: missing libfoo"
    assert rows["srt-oldcore"]["status"] == "incompatible"
    assert "srt-services<1,>=0.1" in rows["srt-oldcore"]["reason"]
    assert rows["srt-blockme"]["status"] == "blocked"
    assert rows["srt-quiet"]["status"] == "not allowed"
    assert rows["srt-dupa"]["problems"] == ["kind 'dup-kind' is also registered by srt-dupb 2.0.0"]
    # Nothing blocked, not allowed or incompatible was imported.
    assert sorted(site.imported()) == ["srt_broken", "srt_dupa", "srt_dupb", "srt_good"]


def test_list_text_and_all(site: Site, cli: Cli) -> None:
    site.install("good", "broken")
    result = cli("list", "--all")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "srt-good 1.2.0  loaded" in out
    assert "provides:    kind good-kind; command good-hello" in out
    assert "srt-broken 0.1.0  failed: import failed: RuntimeError: srt-broken cannot start" in out
    assert "srt-services 1.0.0  loaded" in out
    assert "kind generic" in out
    assert "launcher local" in out


def test_list_hook_filter(site: Site, cli: Cli) -> None:
    site.install("good", "quiet")
    # Plugins installed in the dev venv may implement these hooks too: look at ours only.
    rows = json.loads(cli("list", "--json", "--hook", "cli_commands").stdout)
    ours = [r["name"] for r in rows if r["location"] == str(site.path)]
    assert ours == ["srt-good"]
    rows = by_name(
        json.loads(cli("list", "--json", "--all", "--hook", "srt_register_probes").stdout)
    )
    assert rows["srt-services"]["builtin"] is True
    assert "srt-good" not in rows


def test_help_never_scans_or_imports_plugins(site: Site, run_srt: Run) -> None:
    site.install("good", "broken", "quiet")
    result = run_srt("--help")
    assert result.returncode == 0, result.stderr
    assert "plugins" in result.stdout
    assert site.imported() == []


def test_plugin_command_loads_on_demand(site: Site, run_srt: Run) -> None:
    site.install("good", "broken", "quiet")
    result = run_srt("good-hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello from srt-good"
    # The declared command imports its plugin; undeclared ones may implement commands too.
    assert "srt_broken" not in site.imported()


# --------------------------------------------------------------------------- recipes


def recipe(path: Path, kind: str) -> Path:
    path.write_text(
        f"schema: 2\nname: uses-{kind}\nservices:\n  - name: svc\n    type: {kind}\n"
        "    command: [sleep, '30']\n",
        encoding="utf-8",
    )
    return path


def test_recipe_with_blocked_kind_fails_before_anything_starts(
    site: Site, run_srt: Run, tmp_path: Path
) -> None:
    site.install("blockme", "good")
    site.write_config('[plugins]\nblock = ["srt-blockme"]\n')
    path = recipe(tmp_path / "r.yaml", "blocked-kind")
    result = run_srt("validate", str(path))
    assert result.returncode == 2
    assert "services[svc].type: service type 'blocked-kind' comes from plugin srt-blockme" in (
        result.stderr
    )
    assert f"blocked (listed in plugins.block of the site config {site.config})" in result.stderr
    job = tmp_path / "job"
    result = run_srt("run", str(path), "--job-dir", str(job))
    assert result.returncode == 2
    assert "srt-blockme" in result.stderr
    assert not job.exists()
    assert site.imported() == []


def test_recipe_with_wrong_version_or_missing_plugin(
    site: Site, run_srt: Run, tmp_path: Path
) -> None:
    site.install("good", "oldcore")
    site.write_config('[plugins]\nrequire = ["srt-good>=2", "srt-mooncake>=1"]\n')
    result = run_srt("validate", str(recipe(tmp_path / "a.yaml", "good-kind")))
    assert result.returncode == 2
    assert "srt-good 1.2.0, which is incompatible" in result.stderr
    assert "'srt-good>=2' in plugins.require" in result.stderr
    result = run_srt("validate", str(recipe(tmp_path / "b.yaml", "old-kind")))
    assert result.returncode == 2
    assert "srt-oldcore 0.5.0, which is incompatible" in result.stderr
    assert "requires srt-services<1,>=0.1 but this is srt-services 1.0.0" in result.stderr
    result = run_srt("validate", str(recipe(tmp_path / "c.yaml", "mooncake-master")))
    assert result.returncode == 2
    assert "provided by srt-mooncake, which is not installed" in result.stderr
    assert "the site config requires srt-mooncake>=1, which is not installed" in result.stderr
    job = tmp_path / "job"
    result = run_srt("run", str(tmp_path / "b.yaml"), "--job-dir", str(job))
    assert result.returncode == 2
    assert not job.exists()


def test_recipe_with_a_loadable_plugin_kind_runs(site: Site, run_srt: Run, tmp_path: Path) -> None:
    site.install("good", "broken")
    path = tmp_path / "ok.yaml"
    path.write_text(
        "schema: 2\nname: ok\nservices:\n  - name: svc\n    type: good-kind\n"
        "    command: [python3, -c, 'print(42)']\n    terminal: true\n",
        encoding="utf-8",
    )
    result = run_srt("run", str(path), "--job-dir", str(tmp_path / "job"), "--plain")
    assert result.returncode == 0, result.stderr
    assert site.imported() == ["srt_good"]


# --------------------------------------------------------------------------- lock / check


def test_lock_check_round_trip_and_drift(site: Site, cli: Cli, tmp_path: Path) -> None:
    site.install("good", "dupa", "broken")
    lock = tmp_path / "plugins.lock"
    result = cli("lock", "-o", str(lock))
    assert result.exit_code == 0, result.output
    doc = json.loads(lock.read_text())
    names = {p["name"]: p for p in doc["plugins"]}
    assert names["srt-good"]["version"] == "1.2.0"
    assert len(names["srt-good"]["record_sha256"]) == 64
    assert doc["core"] == "1.0.0"
    result = cli("check", "--lock", str(lock))
    assert result.exit_code == 0, result.output
    assert "ok: no differences" in result.stdout
    # Drift: one added, one removed, one upgraded, one with edited files.
    from dataclasses import replace

    from dummies import DUMMIES

    site.install("blockme")
    site.uninstall("srt-dupa")
    site.install_dist(replace(DUMMIES["good"], version="1.3.0"))
    (site.path / "srt_broken" / "plugin.py").write_text("# patched\n")
    record = site.path / "srt_broken-0.1.0.dist-info" / "RECORD"
    record.write_text(
        record.read_text().replace("srt_broken/plugin.py,sha256=", "srt_broken/plugin.py,sha256=x")
    )
    result = cli("check", "--lock", str(lock))
    assert result.exit_code == 1
    out = result.stdout
    assert "+ srt-blockme 1.0.0: installed, not in the lock" in out
    assert "- srt-dupa 1.0.0: in the lock, not installed" in out
    assert "~ srt-good 1.2.0 -> 1.3.0: version changed" in out
    assert "~ srt-broken 0.1.0: installed files changed" in out
    assert "4 difference(s)" in out
    data = json.loads(cli("check", "--lock", str(lock), "--json").stdout)
    assert data["ok"] is False
    assert {d["change"] for d in data["differences"]} == {"added", "removed", "version", "record"}


def test_check_reports_site_requirements_and_uses_the_site_lock(
    site: Site, cli: Cli, tmp_path: Path
) -> None:
    site.install("good")
    lock = tmp_path / "site.lock"
    assert cli("lock", "-o", str(lock)).exit_code == 0
    site.write_config(
        '[plugins]\nlock = "site.lock"\nrequire = ["srt-good>=1,<2", "srt-absent>=1"]\n'
    )
    result = cli("check")
    assert result.exit_code == 1
    assert f"against the lock {lock}" in result.stdout
    assert "! srt-absent: required by the site config ('srt-absent>=1') but not installed" in (
        result.stdout
    )
    assert "1 difference(s)" in result.stdout
    # The lock is enforced at load time too: a plugin installed later does not load.
    site.install("blockme")
    rows = by_name(json.loads(cli("list", "--json").stdout))
    assert rows["srt-blockme"]["status"] == "incompatible"
    assert "not in the lock file" in rows["srt-blockme"]["reason"]
    assert rows["srt-good"]["status"] == "loaded"


def test_check_without_lock_and_with_missing_site_lock(site: Site, cli: Cli) -> None:
    site.install("good")
    result = cli("check")
    assert result.exit_code == 0
    assert "site rules only" in result.stdout
    site.write_config('[plugins]\nlock = "nowhere.lock"\n')
    result = cli("check")
    assert result.exit_code == 1
    assert "nowhere.lock does not exist" in result.stdout
