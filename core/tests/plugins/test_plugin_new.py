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
