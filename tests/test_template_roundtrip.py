"""The plugin template, end to end, the way a third party meets it.

``srt plugins new demo`` writes a package, and its README is followed as written, in a
fresh venv, against a wheel of this core (the README's way to develop against a core that
is not on the package index): install the package with its test extra, run its tests (the
kit's contract suite), ``srt plugins list``, ``srt dry-run`` and ``srt run`` of the example
recipe, then build the sdist and wheel and check them with twine. Nothing of the dev venv
leaks in.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from srt_services.testing.survivors import assert_no_survivors

REPO = Path(__file__).resolve().parents[1]
#: Printed before each README command, to split the output by command.
MARK = "@@srt-readme-step@@ "


def _run(
    argv: list[str],
    timeout: float = 240,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False, env=env, cwd=cwd
    )
    assert result.returncode == 0, f"{' '.join(argv)} failed:\n{result.stdout}\n{result.stderr}"
    return result


def readme_commands(readme: str) -> dict[str, list[str]]:
    """The ``$ `` lines of each ``##`` section's console blocks, in order."""
    out: dict[str, list[str]] = {}
    section = ""
    in_console = False
    for line in readme.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("```"):
            in_console = line.strip() == "```console"
        elif in_console and line.startswith("$ "):
            out.setdefault(section, []).append(line[2:])
    return out


@pytest.mark.slow
def test_a_generated_plugin_works_as_its_readme_says(tmp_path: Path) -> None:
    # 1. Generate; a wheel of this core stands for "a core not on your package index".
    _run([sys.executable, "-m", "srt_services", "plugins", "new", "demo", "-o", str(tmp_path)])
    package = tmp_path / "srt-demo"
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "-o", str(wheels), "."],
        cwd=REPO / "core",
    )
    (core_wheel,) = wheels.glob("srt_services-*.whl")

    # 2. The README's commands, as written, with the one path it leaves to the reader.
    commands = readme_commands((package / "README.md").read_text(encoding="utf-8"))
    develop = commands["Develop"]
    assert develop[:2] == [
        "python -m venv .venv && . .venv/bin/activate",
        "pip install -e '.[test]'",
    ]
    from_wheel = next(
        c for c in develop if "srt_services-" in c and c.endswith("# a wheel of core")
    )
    core_line = re.sub(r"/path/to/\S+\.whl", str(core_wheel), from_wheel)
    publish = [c for c in commands["Build and publish"] if not c.startswith("twine upload")]
    assert publish == ["pip install build twine", "python -m build", "twine check dist/*"]
    script = [develop[0], core_line, *develop[1:6], *publish]
    site = tmp_path / "site.toml"
    site.write_text("", encoding="utf-8")
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("SRT_", "PYTHON", "VIRTUAL_ENV"))
    }
    # the user's job root (not the package: srt run there must not put logs in the sdist)
    state = tmp_path / "state"
    env.update(
        SRT_SITE_CONFIG=str(site), PIP_DISABLE_PIP_VERSION_CHECK="1", XDG_STATE_HOME=str(state)
    )
    body = "".join(f"echo {shlex.quote(MARK + c)}\n{c}\n" for c in script)
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + body],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, f"{out}\n{result.stderr}"
    step = dict(zip(script, out.split(MARK)[1:], strict=True))
    assert re.search(r"\d+ passed", step["pytest"])
    listed = step["srt plugins list"]
    assert re.search(r"^srt-demo\s+0\.1\.0\s+loaded\s+kind demo$", listed, re.M), listed
    assert "type=demo" in step["srt dry-run examples/demo.yaml"]
    assert "hello from srt-demo" in step["srt run examples/demo.yaml"]
    assert sorted(p.name for p in (package / "dist").iterdir()) == [
        "srt_demo-0.1.0-py3-none-any.whl",
        "srt_demo-0.1.0.tar.gz",
    ]
    assert not (package / "srt-jobs").exists()
    (job,) = (state / "srt" / "jobs").iterdir()
    assert_no_survivors(str(job))

    # 3. The venv holds the wheel's core (not this checkout) and the plugin, and only it.
    srt = str(package / ".venv" / "bin" / "srt")
    listed_json = json.loads(_run([srt, "plugins", "list", "--json"], env=env).stdout)
    assert [(r["name"], r["status"]) for r in listed_json] == [("srt-demo", "loaded")]
    assert listed_json[0]["registered"] == {"kind": ["demo"]}
    assert listed_json[0]["core_requirement"] == "srt-services<2,>=1.0"
    core_at = _run(
        [
            str(package / ".venv" / "bin" / "python"),
            "-c",
            "import srt_services; print(srt_services.__file__)",
        ],
        env=env,
    ).stdout
    assert core_at.startswith(str(package / ".venv")), core_at
