"""The plugin template, end to end, the way a third party meets it.

``srt plugins new demo`` writes a package; it is built into a wheel, installed next to a
non-editable core in a fresh venv (nothing of the dev venv leaks in), and then, in that venv:
``srt plugins list`` shows it loaded, ``srt dry-run`` and ``srt run`` of a recipe using its kind
succeed, and the package's own tests (the kit's contract suite) pass against the installed
core.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from srt_services.testing.survivors import assert_no_survivors

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@pytest.mark.slow
def test_generated_plugin_builds_installs_and_runs(tmp_path: Path) -> None:
    # 1. Generate.
    _run([sys.executable, "-m", "srt_services", "plugins", "new", "demo", "-o", str(tmp_path)])
    package = tmp_path / "srt-demo"
    assert (package / "pyproject.toml").is_file()

    # 2. Build wheels of core and the plugin (build isolation fetches hatchling).
    wheels = tmp_path / "wheels"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "-w",
            str(wheels),
            str(REPO / "core"),
            str(package),
        ]
    )
    built = sorted(p.name for p in wheels.glob("*.whl"))
    assert [n.split("-")[0] for n in built] == ["srt_demo", "srt_services"], built

    # 3. A fresh venv with core, the plugin and pytest; dependencies from the index.
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)])
    bin_dir = venv / "bin"
    install = [str(bin_dir / "pip"), "install", "--quiet"]
    _run([*install, *(str(p) for p in wheels.glob("*.whl")), "pytest"])

    site = tmp_path / "site.toml"
    site.write_text("", encoding="utf-8")
    leak = ("SRT_", "PYTHON", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(leak)}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        SRT_SITE_CONFIG=str(site),
        VIRTUAL_ENV=str(venv),
    )
    srt = str(bin_dir / "srt")

    # 4. The installed core sees the installed plugin, and only it.
    listed = json.loads(_run([srt, "plugins", "list", "--json"], env=env).stdout)
    assert [(r["name"], r["status"]) for r in listed] == [("srt-demo", "loaded")]
    assert listed[0]["registered"] == {"kind": ["demo"]}
    assert listed[0]["core_requirement"] == "srt-services<2,>=1.0"
    assert str(venv) in listed[0]["location"]

    # 5. Dry-run and run a recipe that uses the new kind.
    port = _free_port()
    recipe = tmp_path / "demo.yaml"
    recipe.write_text(
        f"""schema: 2
name: demo-roundtrip
services:
  - name: demo
    type: demo
    options:
      port: {port}
      message: hello from the round trip
  - name: client
    command:
      - python3
      - -c
      - "import urllib.request; print(urllib.request.urlopen('http://{{head_ip}}:{port}/').read().decode())"
    terminal: true
""",
        encoding="utf-8",
    )
    plan = _run([srt, "dry-run", str(recipe)], env=env).stdout
    assert "type=demo" in plan
    assert f"srt_demo.server --host '<node0-ip>' --port {port}" in plan
    job = tmp_path / "job"
    _run([srt, "run", str(recipe), "--job-dir", str(job), "--plain"], env=env, timeout=120)
    client_log = (job / "logs" / "service_client.out").read_text()
    assert "hello from the round trip" in client_log
    assert_no_survivors(str(job))

    # 6. The generated tests (the kit's contract suite) pass against the installed core.
    result = _run(
        [str(bin_dir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        env=env,
        cwd=package,
    )
    assert " passed" in result.stdout
