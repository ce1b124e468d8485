"""``srt plugins list/lock/check`` and recipe validation against plugin rules.

The ``srt plugins`` commands run in-process (``cli``) over a site directory of real dummy
distributions on ``sys.path``; whatever must hold for a whole ``srt`` process (``--help``
imports nothing, a recipe fails before anything starts) runs ``srt`` in a subprocess.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import Result
from dummies import DUMMIES
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
    assert result.exit_code == 1, result.output  # a plugin failed, two clash
    listed = json.loads(result.stdout)
    assert [r["name"] for r in listed] == sorted(r["name"] for r in listed)
    rows = by_name(listed)
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


def table_rows(out: str, site: Site) -> list[list[str]]:
    """The table's rows as cells, ours only (the dev venv may hold real plugins too)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("PLUGIN "))
    end = lines.index("", start)
    rows = [re.split(r"\s{2,}", line) for line in lines[start:end]]
    ours = {d.name for d in DUMMIES.values()} | {"PLUGIN", "srt-services"}
    return [r for r in rows if r[0] in ours]


def test_list_text_is_a_sorted_table_with_each_problem_once(site: Site, cli: Cli) -> None:
    site.install("good", "broken", "dupb", "dupa", "oldcore")
    result = cli("list", "--all")
    assert result.exit_code == 1
    rows = table_rows(result.stdout, site)
    assert [r[:3] for r in rows] == [
        ["PLUGIN", "VERSION", "STATUS"],
        ["srt-services", "1.0.0", "loaded"],
        ["srt-broken", "0.1.0", "failed"],
        ["srt-dupa", "1.0.0", "loaded"],
        ["srt-dupb", "2.0.0", "loaded"],
        ["srt-good", "1.2.0", "loaded"],
        ["srt-oldcore", "0.5.0", "incompatible"],
    ]
    assert rows[1][3].startswith("kind generic; probe file, http, log, tcp; placement ")
    assert [r[3] for r in rows[2:]] == [
        "kind broken-kind (declared)",
        "kind dup-kind",
        "kind dup-kind",
        "kind good-kind; command good-hello",
        "kind old-kind (declared)",
    ]
    lines = result.stdout.splitlines()
    at = lines.index("problems:")
    assert lines[at + 1 : at + 4] == [
        "  srt-broken 0.1.0: failed: import failed: RuntimeError: srt-broken cannot start:"
        " missing libfoo",
        "  srt-oldcore 0.5.0: incompatible: it requires srt-services<1,>=0.1 but this is"
        " srt-services 1.0.0; install a release of the plugin made for this core",
        "  kind 'dup-kind' is registered by both srt-dupa 1.0.0 and srt-dupb 2.0.0: neither"
        " can be used; uninstall one, or block it (plugins.block, SRT_DISABLED_PLUGINS)",
    ]
    assert result.stdout.count("missing libfoo") == 1
    assert result.stdout.count("dup-kind' is") == 1
    summary = next(line for line in lines if line.endswith(" clash"))
    assert re.fullmatch(r"\d+ plugin\(s\): \d+ loaded, 1 failed, 1 incompatible; 1 clash", summary)
    assert "`srt plugins list -v` shows the traceback of each failed import." in lines
    assert "Traceback" not in result.output


def test_list_verbose_shows_the_traceback_and_no_loader_warning(site: Site, run_srt: Run) -> None:
    site.install("good", "broken")
    result = run_srt("plugins", "list", "-v")
    assert result.returncode == 1
    out = result.stdout
    assert "srt-broken 0.1.0  failed\n  why:         import failed: RuntimeError:" in out
    assert f"  location:    {site.path}" in out
    assert "  traceback:\n    Traceback (most recent call last):" in out
    assert "srt_broken/plugin.py" in out
    assert "\n    RuntimeError: srt-broken cannot start: missing libfoo\n" in out
    assert "missing libfoo" not in result.stderr
    # Without -v: one line per problem, the loader's own warning silenced.
    result = run_srt("plugins", "list")
    assert result.returncode == 1
    assert result.stdout.count("missing libfoo") == 1
    assert result.stderr == ""
    # SRT_TRACE_PLUGINS=1 is the documented other way to the traceback.
    result = run_srt("plugins", "list", SRT_TRACE_PLUGINS="1")
    assert "  traceback:\n    Traceback (most recent call last):" in result.stdout


def test_list_exits_0_when_everything_loads(site: Site, cli: Cli) -> None:
    site.install("good", "blockme")
    site.write_config('[plugins]\nblock = ["srt-blockme"]\n')
    result = cli("list")
    assert result.exit_code == 0, result.output
    assert [r[2] for r in table_rows(result.stdout, site)] == ["STATUS", "blocked", "loaded"]
    assert "problems:" not in result.stdout


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
        f"schema: 2\nname: uses-{kind}\nobservability:\n  metrics: false\nservices:\n  - name: svc\n    type: {kind}\n"
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
    site: Site, run_srt: Run, tmp_path: Path, absent_first_party: tuple[str, str]
) -> None:
    kind, dist = absent_first_party
    site.install("good", "oldcore")
    site.write_config(f'[plugins]\nrequire = ["srt-good>=2", "{dist}>=1"]\n')
    result = run_srt("validate", str(recipe(tmp_path / "a.yaml", "good-kind")))
    assert result.returncode == 2
    assert "srt-good 1.2.0, which is incompatible" in result.stderr
    assert "'srt-good>=2' in plugins.require" in result.stderr
    result = run_srt("validate", str(recipe(tmp_path / "b.yaml", "old-kind")))
    assert result.returncode == 2
    assert "srt-oldcore 0.5.0, which is incompatible" in result.stderr
    assert "requires srt-services<1,>=0.1 but this is srt-services 1.0.0" in result.stderr
    result = run_srt("validate", str(recipe(tmp_path / "c.yaml", kind)))
    assert result.returncode == 2
    assert f"provided by {dist}, which is not installed" in result.stderr
    assert f"the site config requires {dist}>=1, which is not installed" in result.stderr
    job = tmp_path / "job"
    result = run_srt("run", str(tmp_path / "b.yaml"), "--job-dir", str(job))
    assert result.returncode == 2
    assert not job.exists()


def test_recipe_with_a_loadable_plugin_kind_runs(site: Site, run_srt: Run, tmp_path: Path) -> None:
    site.install("good", "broken")
    path = tmp_path / "ok.yaml"
    path.write_text(
        "schema: 2\nname: ok\nobservability:\n  metrics: false\nservices:\n  - name: svc\n    type: good-kind\n"
        "    command: [python3, -c, 'print(42)']\n    terminal: true\n",
        encoding="utf-8",
    )
    result = run_srt("run", str(path), "--job-dir", str(tmp_path / "job"), "--plain")
    assert result.returncode == 0, result.stderr
    assert site.imported() == ["srt_good"]


# --------------------------------------------------------------------------- lock / check


def test_lock_check_round_trip_and_drift(site: Site, cli: Cli, tmp_path: Path) -> None:
    site.install("good", "dupa")
    lock = tmp_path / "plugins.lock"
    result = cli("lock", "-o", str(lock))
    assert result.exit_code == 0, result.output
    doc = json.loads(lock.read_text())
    assert doc["srt_plugin_lock"] == 2
    names = {p["name"]: p for p in doc["plugins"]}
    assert names["srt-good"]["version"] == "1.2.0"
    assert len(names["srt-good"]["files_sha256"]) == 64
    assert doc["core"] == "1.0.0"
    result = cli("check", "--lock", str(lock))
    assert result.exit_code == 0, result.output
    assert "ok: no differences" in result.stdout
    # A plugin added since, which cannot load on this core anyway.
    site.install("oldcore")
    result = cli("check", "--lock", str(lock), "--metadata-only")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines()[1:] == [
        "  note: --metadata-only: no plugin imported; import failures and clashes unchecked",
        "  + srt-oldcore 0.5.0: installed, not in the lock",
        "  ! srt-oldcore 0.5.0: incompatible: it requires srt-services<1,>=0.1 but this is"
        " srt-services 1.0.0; install a release of the plugin made for this core",
        "2 difference(s)",
        f"after an intended change, accept the installed set: srt plugins lock -o {lock}",
    ]
    site.uninstall("srt-oldcore")
    # Drift: one added, one removed, one upgraded, one edited in place (RECORD untouched).
    from dataclasses import replace

    from dummies import DUMMIES

    site.install("blockme")
    site.uninstall("srt-dupa")
    site.install_dist(replace(DUMMIES["good"], version="1.3.0"))
    result = cli("check", "--lock", str(lock))
    assert result.exit_code == 1
    site.install("broken")
    cli("lock", "-o", str(lock))
    (site.path / "srt_broken" / "plugin.py").write_text("# patched\n")
    site.install("dupa")
    result = cli("check", "--lock", str(lock))
    out = result.stdout
    assert result.exit_code == 1
    assert "~ srt-broken 0.1.0: installed files changed (edited, or another build" in out
    assert "+ srt-dupa 1.0.0: installed, not in the lock" in out
    assert f"accept the installed set: srt plugins lock -o {lock}" in out
    data = json.loads(cli("check", "--lock", str(lock), "--json").stdout)
    assert data["ok"] is False
    assert {d["change"] for d in data["differences"]} == {"added", "files"}


def test_check_without_a_lock_reports_what_cannot_load(site: Site, cli: Cli) -> None:
    site.install("good", "broken", "oldcore", "dupa", "dupb", "blockme")
    site.write_config('[plugins]\nblock = ["srt-blockme"]\n')
    result = cli("check")
    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        f"srt plugins check: installed plugins against the site config {site.config}",
        "  note: no lock file (--lock, or plugins.lock in the site config)",
        "  ! srt-broken 0.1.0: failed: import failed: RuntimeError: srt-broken cannot start:"
        " missing libfoo (`srt plugins list -v` shows the traceback)",
        "  ! srt-oldcore 0.5.0: incompatible: it requires srt-services<1,>=0.1 but this is"
        " srt-services 1.0.0; install a release of the plugin made for this core",
        "  ! kind 'dup-kind': registered by both srt-dupa 1.0.0 and srt-dupb 2.0.0; uninstall"
        " one, or block it (plugins.block in the site config, SRT_DISABLED_PLUGINS)",
        "3 difference(s)",
    ]
    assert "srt_blockme" not in site.imported()
    data = json.loads(cli("check", "--json").stdout)
    assert [d["change"] for d in data["differences"]] == ["failed", "incompatible", "clash"]
    # --metadata-only imports nothing, and so finds only what metadata shows.
    before = site.imported()
    result = cli("check", "--metadata-only")
    assert result.exit_code == 1
    assert "srt-oldcore 0.5.0: incompatible" in result.stdout
    assert "srt-broken" not in result.stdout
    assert site.imported() == before


def test_check_asks_to_rewrite_a_format_1_lock(site: Site, cli: Cli, tmp_path: Path) -> None:
    site.install("good")
    lock = tmp_path / "old.lock"
    lock.write_text(
        '{"srt_plugin_lock": 1, "core": "1.0.0", "plugins":'
        ' [{"name": "srt-good", "version": "1.2.0", "record_sha256": "00"}]}'
    )
    result = cli("check", "--lock", str(lock))
    assert result.exit_code == 1
    assert (
        f"! lock: {lock} is a format-1 lock (RECORD hashes, which change with how a wheel is"
        f" installed and miss an edited file); rewrite it with `srt plugins lock -o {lock}`"
    ) in result.stdout
    assert cli("lock", "-o", str(lock)).exit_code == 0
    assert cli("check", "--lock", str(lock)).exit_code == 0


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
    assert "no lock file" in result.stdout
    site.write_config('[plugins]\nlock = "nowhere.lock"\n')
    result = cli("check")
    assert result.exit_code == 1
    assert "nowhere.lock does not exist; write it with `srt plugins lock -o" in result.stdout
