"""``srt run``'s start-up imports what loading, checking and planning use, not what only
other commands or other inputs need: every module it imports before the first launch is
time the job waits for (``bench/dynamo_ready.py``). Checked on ``srt dry-run --local``,
the same load, check and plan, in a fresh interpreter with ``-X importtime``, with the
repository's plugins installed; and the orchestrator's inotify descriptor, which it opens
before the first launch, opens without a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

#: Loaded on demand only: PyYAML (a YAML recipe), regex (a log probe's pattern), tomllib
#: (a site config file), packaging's requirement grammar (a core range with extras or a
#: marker, a site's pins), rich (rendering a table or live progress), psutil (a busy port).
NOT_AT_START = ("yaml", "_yaml", "regex", "tomllib", "packaging.requirements", "rich", "psutil")


def _env() -> dict[str, str]:
    # no site config, the machine's plugins as a user has them (autoload on)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON"))}
    env["SRT_SITE_CONFIG"] = os.devnull  # "no site config", said explicitly
    return env


def test_planning_a_json_recipe_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    recipe = tmp_path / "job.json"
    recipe.write_text(
        json.dumps(
            {
                "schema": 2,
                "name": "imports",
                # without srt-exporters the default metrics draw a warning, and a warning's
                # line:col is found by the YAML mark finder: a reason to load PyYAML
                "observability": {"metrics": False},
                "services": [{"name": "side", "command": ["sleep", "30"], "start": "infra"}],
            }
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "srt_services",
            "dry-run",
            "--local",
            str(recipe),
        ],
        capture_output=True,
        text=True,
        env=_env(),
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in out.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "srt_services.plan.resolve" in modules, "the import log was not captured"
    loaded = sorted(m for m in modules for p in NOT_AT_START if m == p or m.startswith(p + "."))
    assert loaded == []


def test_an_inotify_descriptor_opens_without_a_child_process() -> None:
    """inotify_simple alone finds libc through ``ldconfig -p`` (a fork and a parse)."""
    probe = (
        "import subprocess\n"
        "def refuse(*a, **k):\n"
        "    raise AssertionError(f'a child process: {a[:1]}')\n"
        "subprocess.Popen.__init__ = refuse\n"
        "from srt_services.inotify import open_inotify\n"
        "from inotify_simple import flags\n"
        "fd = open_inotify()\n"
        "fd.add_watch('.', flags.CREATE)\n"
        "fd.close()\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=60
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == "ok\n"
