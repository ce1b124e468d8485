"""``srt --help`` stays cheap: no pydantic, no YAML, no recipe models, no plugin, no
entry-point scan. Checked in a fresh interpreter with ``-X importtime`` (the import log
lists every module the process imported), with the repository's plugins installed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

FORBIDDEN_PREFIXES = (
    "pydantic",
    "pydantic_core",
    "yaml",
    "_yaml",
    "pluggy",
    "orjson",
    "httpx",
    "psutil",
    "ruamel",
    "srt_services.recipe",
    "srt_services.plan",
    "srt_services.plugins",
    "srt_services.hookspecs",
    "srt_services.extend",
    "srt_services.kinds",
    "srt_services.probes",
    "srt_services.launch",
    "srt_services.supervise",
    "srt_services.jobdir",
    "srt_etcd",
    "srt_nats",
    "srt_oarbank",
    "oarbank_protocol",
)


def _env() -> dict[str, str]:
    # the machine's plugin set as a user has it (autoload on), minus test-only settings
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON"))}
    env["COLUMNS"] = "100"
    return env


def _imported(args: list[str]) -> tuple[set[str], subprocess.CompletedProcess[str]]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=60,
    )
    modules = set()
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":
                modules.add(name)
    return modules, out


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]])
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    modules, out = _imported(args)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "srt_services.cli.main" in modules, "the import log was not captured"
    heavy = sorted(m for m in modules if m.startswith(FORBIDDEN_PREFIXES))
    assert heavy == []


def test_help_lists_the_core_commands() -> None:
    _, out = _imported(["--help"])
    for command in ("validate", "dry-run", "schema", "kinds", "migrate"):
        assert command in out.stdout


def test_help_never_scans_entry_points() -> None:
    """``importlib.metadata`` itself is imported by rich-click, so watch the calls instead."""
    probe = (
        "import importlib.metadata as md, sys\n"
        "calls = []\n"
        "for name in ('entry_points', 'distributions', 'distribution', 'version', 'metadata'):\n"
        "    real = getattr(md, name)\n"
        "    def spy(*a, _n=name, _r=real, **k):\n"
        "        calls.append(_n)\n"
        "        return _r(*a, **k)\n"
        "    setattr(md, name, spy)\n"
        "import runpy\n"
        "sys.argv = ['srt', '--help']\n"
        "try:\n"
        "    runpy.run_module('srt_services', run_name='__main__')\n"
        "except SystemExit:\n"
        "    pass\n"
        "scans = [c for c in calls if c in ('entry_points', 'distributions')]\n"
        "sys.stderr.write('CALLS=' + ','.join(scans) + '\\n')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=60,
    )
    assert "CALLS=\n" in out.stderr, out.stderr[-2000:]


def test_subcommand_help_is_still_light() -> None:
    modules, out = _imported(["dry-run", "--help"])
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--nodes" in out.stdout
    heavy = sorted(m for m in modules if m.startswith(FORBIDDEN_PREFIXES))
    assert heavy == []
