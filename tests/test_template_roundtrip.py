"""The plugin template, end to end, the way a third party meets it.

From a fresh directory, ``srt plugins new demo`` writes a package, and its README is
followed as written, top to bottom, in a fresh venv: every ``$`` line of "Develop" and of
"Build and publish" (but the upload), with one substitution, the path of a wheel of this
core, which stands for "core is not on your package index yet" (the README's conditional
step; third-party dependencies come from pip's usual index). The example job runs with its
job directory inside the project (``SRT_JOB_ROOT`` set to it, as a user may), the author
chooses a license as the generated ``pyproject.toml`` says, and then the sdist that
``python -m build`` wrote is opened: the package's files, the license and the README are
in it; the job directory, the venv and the byte-code caches that following the README left
in the project are not. Nothing of the dev venv leaks in, and nothing depends on the
terminal (its variables are dropped) or on where this repository is cloned.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
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


#: Variables of the caller's terminal that would change srt's output (widths, colour).
TERMINAL = ("COLUMNS", "LINES", "FORCE_COLOR", "CLICOLOR_FORCE", "PY_COLORS", "TERM")


@pytest.mark.slow
def test_a_generated_plugin_works_as_its_readme_says(tmp_path: Path) -> None:
    # 1. Generate, from a fresh directory; a wheel of this core stands for "a core not on
    # your package index".
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    created = _run([sys.executable, "-m", "srt_services", "plugins", "new", "demo"], cwd=fresh)
    assert "README.md" in created.stdout  # where to look when core is not on the index
    package = fresh / "srt-demo"
    wheels = tmp_path / "wheels"
    _run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "-o", str(wheels), "."],
        cwd=REPO / "core",
    )
    (core_wheel,) = wheels.glob("srt_services-*.whl")

    # 2. The README's commands, as written and in its order, with the one path it leaves to
    # the reader filled in.
    commands = readme_commands((package / "README.md").read_text(encoding="utf-8"))
    develop = [re.sub(r"/path/to/\S+\.whl", str(core_wheel), c) for c in commands["Develop"]]
    assert develop[0] == "python -m venv .venv && . .venv/bin/activate"
    assert str(core_wheel) in develop[1], develop  # core before the package
    assert "pip install -e '.[test]'" in develop
    assert not [c for c in develop if "/path/to/" in c], develop
    publish = [c for c in commands["Build and publish"] if not c.startswith("twine upload")]
    assert "python -m build" in publish
    # The author's license choice, as the generated pyproject.toml's comment says; between
    # developing and building, as the README's "Choose a license first".
    choose_license = (
        "printf 'MIT License\\n' > LICENSE && sed -i 's/^keywords = /license = \"MIT\"\\n"
        'license-files = ["LICENSE"]\\nkeywords = /\' pyproject.toml'
    )
    script = [*develop, choose_license, *publish]
    site = tmp_path / "site.toml"
    site.write_text("", encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SRT_", "PYTHON", "VIRTUAL_ENV")) and k not in TERMINAL
    }
    # jobs inside the project, as a user may put them (the default root is per user): the
    # sdist must still leave them out
    env.update(
        SRT_SITE_CONFIG=str(site),
        SRT_JOB_ROOT=str(package),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    body = "".join(f"echo {shlex.quote(MARK + c)}\n{c}\n" for c in script)
    result = subprocess.run(
        ["bash", "-c", "set -euo pipefail\nexec 2>&1\n" + body],
        cwd=package,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = result.stdout
    assert result.returncode == 0, out
    step = dict(zip(script, out.split(MARK)[1:], strict=True))
    assert re.search(r"\d+ passed", step["pytest"])
    listed = step["srt plugins list"]
    assert re.search(r"^srt-demo\s+0\.1\.0\s+loaded\s+kind demo$", listed, re.M), listed
    dry_run, run = step["srt dry-run examples/demo.yaml"], step["srt run examples/demo.yaml"]
    assert "type=demo" in dry_run
    assert "hello from srt-demo" in run
    # the example turns metrics off: no "runs without exporters" warning, at either step
    assert "exporters" not in dry_run + run, dry_run + run
    assert sorted(p.name for p in (package / "dist").iterdir()) == [
        "srt_demo-0.1.0-py3-none-any.whl",
        "srt_demo-0.1.0.tar.gz",
    ]
    (job,) = (p for p in package.iterdir() if p.name.startswith("demo-example-"))
    assert_no_survivors(str(job))

    # 3. What the sdist holds: the package, and nothing that following the README left in
    # the project (the job directory, the venv, pytest's and Python's caches).
    leftovers = {job.name, ".venv", ".pytest_cache"}
    # pytest's cache lands where its cache_dir says: under tox that may be elsewhere, so a
    # stand-in is put where a user's would be (the sdist must leave it out either way)
    (package / ".pytest_cache").mkdir(exist_ok=True)
    assert {p.name for p in package.iterdir()} >= leftovers
    assert list(package.rglob("__pycache__"))
    with tarfile.open(package / "dist" / "srt_demo-0.1.0.tar.gz") as sdist:
        members = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
        pkg_info = sdist.extractfile("srt_demo-0.1.0/PKG-INFO")
        assert pkg_info is not None
        assert "License-Expression: MIT" in pkg_info.read().decode()
    assert {"LICENSE", "README.md", "pyproject.toml", "src/srt_demo/kind.py"} <= members
    assert {"tests/test_kind.py", "examples/demo.yaml", ".gitignore"} <= members
    tops = {m.split("/")[0] for m in members}
    assert tops <= {
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "pyproject.toml",
        "PKG-INFO",
        ".gitignore",
        "src",
        "tests",
        "examples",
    }, tops
    assert not [m for m in members if "__pycache__" in m or m.endswith(".pyc")], members
    assert step["twine check dist/*"].count("PASSED") == 2

    # 4. The venv holds the wheel's core (not this checkout) and the plugin, and only it.
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
