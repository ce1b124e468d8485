"""The generated docs are current: ``docs/recipe-reference.md`` (from the models) and
``docs/plugins.md`` (from the hookspecs). After changing either, run::

    .venv/bin/python -m srt_services.docs_gen --write
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from srt_services import docs_gen
from srt_services.recipe.models import Recipe
from srt_services.recipe.pydantic_errors import field_names
from srt_services.testing import kit


@pytest.mark.parametrize("name", ["recipe-reference.md", "plugins.md"])
def test_generated_docs_are_current(repo: Path, name: str) -> None:
    path = repo / "docs" / name
    expected = docs_gen.outputs(repo)[path]
    assert path.exists(), "run `python -m srt_services.docs_gen --write`"
    assert path.read_text(encoding="utf-8") == expected, (
        f"docs/{name} is stale: run `python -m srt_services.docs_gen --write`"
    )


def test_check_mode(repo: Path, python: str, srt_env: dict[str, str], tmp_path: Path) -> None:
    ok = subprocess.run(
        [python, "-m", "srt_services.docs_gen", "--check"],
        capture_output=True,
        text=True,
        env=srt_env,
        cwd=repo,
        check=False,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "plugins.md").write_text("old\n")
    stale = subprocess.run(
        [python, "-m", "srt_services.docs_gen", "--check", "--root", str(tmp_path)],
        capture_output=True,
        text=True,
        env=srt_env,
        check=False,
        timeout=120,
    )
    assert stale.returncode == 1
    assert "plugins.md is stale" in stale.stderr
    assert "recipe-reference.md is stale" in stale.stderr


def test_write_mode(tmp_path: Path) -> None:
    assert docs_gen.main(["--write", "--root", str(tmp_path)]) == 0
    assert docs_gen.stale(tmp_path) == []


def test_every_recipe_field_is_documented() -> None:
    text = docs_gen.recipe_reference()
    for model, _ in docs_gen._walk(Recipe):
        assert f"### {model.__name__}\n" in text
        for key in field_names(model):
            assert f"| `{key}` |" in text, f"{model.__name__}.{key}"


def test_builtin_probes_kinds_and_placements_are_documented() -> None:
    text = docs_gen.recipe_reference()
    plugins = kit.isolated_plugins()
    for name, probe in plugins.probes().items():
        assert f"### Probe `{name}`" in text
        for key in probe.Config.model_fields:
            assert f"| `{key}` |" in text
    for name in plugins.kinds():
        assert f"| `{name}` |" in text
    for name in plugins.placements():
        assert f"| `{name}` |" in text
    for name in plugins.expansions():
        assert f"| `{name}` |" in text


@pytest.mark.parametrize(
    ("key", "row"),
    [
        ("gpus_per_node", "| `gpus_per_node` | integer ≥ 1, ≤ 1024 | `8` |"),
        ("timeout_seconds", "| `timeout_seconds` | number > 0 | `null` |"),
        ("name", "| `name` | name | **required** |"),
        ("build_timeout_seconds", "| `build_timeout_seconds` | number > 0 | `1800` |"),
        ("env", "| `env` | mapping of variable name to text | `{}` |"),
        ("start", "| `start` | `infra` \\| `before_workers` \\| `after_frontend` | `null` |"),
    ],
)
def test_types_and_defaults_are_readable(key: str, row: str) -> None:
    assert row in docs_gen.recipe_reference()


def test_installed_plugins_do_not_change_the_docs() -> None:
    assert docs_gen.recipe_reference(kit.isolated_plugins()) == docs_gen.recipe_reference()
