"""``srt plugins new``: the package it writes from ``srt_services/_template/skeleton``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from srt_services.cli.main import main
from srt_services.cli.plugin_cmds import template_dir, template_values


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def main_command(ctx: click.Context) -> None:
    """Runs ``srt`` as users do: main's exit codes and plain error lines."""
    main(list(ctx.args))


TEMPLATE = Path(__file__).resolve().parents[3] / "core/src/srt_services/_template/skeleton"


def new(*args: str) -> tuple[int, str]:
    """``srt plugins new ARGS`` through srt's own entry point, which prints errors as plain
    lines (click's runner would show rich-click's boxes, folded at the terminal width)."""
    result = CliRunner().invoke(main_command, ["plugins", "new", *args])
    return result.exit_code, result.output


def test_generates_a_complete_package(tmp_path: Path) -> None:
    code, out = new("my-cache", "-o", str(tmp_path))
    assert code == 0, out
    root = tmp_path / "srt-my-cache"
    assert "created" in out
    files = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert {
        "pyproject.toml",
        "README.md",
        "CHANGELOG.md",
        "examples/my-cache.yaml",
        "src/srt_my_cache/__init__.py",
        "src/srt_my_cache/plugin.py",
        "src/srt_my_cache/kind.py",
        "src/srt_my_cache/server.py",
        "src/srt_my_cache/py.typed",
        "tests/conftest.py",
        "tests/test_kind.py",
        "tests/test_server.py",
    } <= files
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "srt-my-cache"
    assert meta["project"]["dependencies"] == ["srt-services>=1.0,<2"]
    assert meta["project"]["entry-points"]["srt.plugins"] == {"my-cache": "srt_my_cache.plugin"}
    assert meta["project"]["entry-points"]["srt.provides"] == {
        "kind.my-cache": "srt_my_cache.plugin"
    }
    for path in root.rglob("*"):
        if path.is_file():
            assert "{{" not in path.read_text(), f"unfilled slot in {path}"
    kind_src = (root / "src/srt_my_cache/kind.py").read_text()
    assert "class MyCacheKind(ServiceKind)" in kind_src
    assert '"MY_CACHE_MESSAGE"' in kind_src
    compile(kind_src, "kind.py", "exec")


def test_name_rules_and_existing_directory(tmp_path: Path) -> None:
    for bad in ("My_Cache", "1cache", "cache-", "a b"):
        code, out = new(bad, "-o", str(tmp_path))
        assert code == 2, (bad, out)
    code, _ = new("srt-demo", "-o", str(tmp_path))  # the srt- prefix is accepted
    assert code == 0
    assert (tmp_path / "srt-demo" / "src" / "srt_demo" / "kind.py").exists()
    code, out = new("demo", "-o", str(tmp_path))
    assert code == 1
    assert "exists and is not empty" in out
    assert new("demo", "-o", str(tmp_path), "--force")[0] == 0


def test_template_lookup_and_values(tmp_path: Path) -> None:
    assert template_dir() == TEMPLATE
    assert template_dir(str(TEMPLATE.parent)) == TEMPLATE
    from click import UsageError

    with pytest.raises(UsageError):
        template_dir(str(tmp_path / "nowhere"))
    assert template_values("a-b2")["Class"] == "AB2Kind"


def _sdist_members(root: Path, out: Path) -> set[str]:
    """Build the package's sdist as ``python -m build --sdist`` does (without isolation: the
    test environment holds hatchling) and list what is inside, without the top directory."""
    import subprocess
    import sys
    import tarfile

    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(out), str(root)],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    (sdist,) = out.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        return {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}


def test_jobs_venvs_and_caches_stay_out_of_git_and_the_sdist(tmp_path: Path) -> None:
    """An author runs the example in the project (``--job-dir``, ``SRT_JOB_ROOT=.`` or the
    old ``srt-jobs/``), keeps a venv there and runs the tests: none of it may be published."""
    code, out = new("demo", "-o", str(tmp_path))
    assert code == 0, out
    root = tmp_path / "srt-demo"
    ignored = (root / ".gitignore").read_text().splitlines()
    for pattern in ("srt-jobs/", ".venv/", "__pycache__/", "dist/"):
        assert pattern in ignored, pattern
    leftovers = [
        "srt-jobs/demo-example-20260101-120000-ab12/logs/demo.out",
        "demo-example-20260101-120000-ab12/state.json",  # SRT_JOB_ROOT=.
        ".venv/bin/python",
        "venv/pyvenv.cfg",
        "src/srt_demo/__pycache__/kind.cpython-311.pyc",
        ".pytest_cache/README.md",
        ".mypy_cache/x.json",
        ".ruff_cache/x",
        ".hypothesis/examples/x",
        "build/lib/x.py",
    ]
    for rel in leftovers:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / "LICENSE").write_text("the author's choice\n")
    members = _sdist_members(root, tmp_path / "dist")
    assert {"LICENSE", "README.md", "pyproject.toml", "src/srt_demo/kind.py"} <= members
    assert "tests/test_kind.py" in members and "examples/demo.yaml" in members
    left_dirs = tuple(r.rsplit("/", 1)[0] + "/" for r in leftovers)
    assert not [m for m in members if m.startswith(left_dirs)]
    assert not [m for m in members if "__pycache__" in m or m.endswith(".pyc")]


def test_example_recipe_needs_no_exporters(tmp_path: Path) -> None:
    """The example turns metrics off: without srt-exporters (a plugin author's venv), the
    default would print core's "runs without exporters" warning at dry-run and at run."""
    import yaml

    assert new("demo", "-o", str(tmp_path))[0] == 0
    recipe = yaml.safe_load((tmp_path / "srt-demo/examples/demo.yaml").read_text())
    assert recipe["observability"] == {"metrics": False}


def test_readme_installs_core_before_the_package(tmp_path: Path) -> None:
    """Before core is on the package index, ``pip install -e '.[test]'`` fails: the README
    says how to install core where a reader following it top to bottom needs it, before."""
    assert new("demo", "-o", str(tmp_path))[0] == 0
    readme = (tmp_path / "srt-demo/README.md").read_text()
    develop = readme.split("## Develop", 1)[1].split("\n## ", 1)[0]
    wheel = develop.index("srt_services-1.0.0-py3-none-any.whl")
    assert wheel < develop.index("pip install -e '.[test]'")
