"""Issue 18 item 13 (H11): parsing is bounded: size limit, duplicate keys in JSON, NUL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from srt_services.errors import RecipeInvalid
from srt_services.plugins.manager import PluginSet
from srt_services.recipe import bounds
from srt_services.recipe.load import load_recipe


def _load(path: Path) -> None:
    load_recipe(str(path), PluginSet(autoload=False))


def test_H11_duplicate_keys_in_json_are_refused_with_their_line(tmp_path: Path) -> None:
    recipe = tmp_path / "r.json"
    recipe.write_text(
        '{"schema": 2, "name": "dup",\n "services": [{"name": "a", "command": ["x"],\n'
        '   "name": "b"}]}\n'
    )
    with pytest.raises(RecipeInvalid) as err:
        _load(recipe)
    assert "duplicate key 'name'" in str(err.value)
    assert "r.json:3:" in str(err.value)


def test_H11_equal_keys_in_different_objects_are_fine(tmp_path: Path) -> None:
    recipe = tmp_path / "r.json"
    doc = {
        "schema": 2,
        "name": "ok",
        "services": [
            {"name": "a", "command": ["x", 'a "quoted": colon']},
            {"name": "b", "command": ["y"]},
        ],
    }
    recipe.write_text(json.dumps(doc))
    _load(recipe)
    assert not bounds.json_has_duplicate_keys(recipe.read_text(), doc)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("r.yaml", 'schema: 2\nname: nul\nservices:\n  - name: a\n    command: [sleep, "1\\0"]\n'),
        (
            "r.json",
            '{"schema": 2, "name": "nul", "services": [{"name": "a", "args": ["a\\u0000b"],'
            ' "command": ["sleep"]}]}',
        ),
        (
            "r.yaml",
            'schema: 2\nname: nul\nservices:\n  - name: a\n    preamble: "x\\x00"\n    command: [x]\n',
        ),
    ],
)
def test_H11_nul_in_any_argv_word_is_refused_at_load_time(
    tmp_path: Path, name: str, text: str
) -> None:
    recipe = tmp_path / name
    recipe.write_text(text)
    with pytest.raises(RecipeInvalid) as err:
        _load(recipe)
    assert "must not contain a NUL character" in str(err.value)
    assert (
        "services[" in str(err.value) or "services.0" in str(err.value) or "[a]" in str(err.value)
    )


def test_H11_a_recipe_over_the_size_limit_is_refused_before_parsing(tmp_path: Path) -> None:
    recipe = tmp_path / "big.yaml"
    recipe.write_text("schema: 2\nname: big\n# " + "x" * 5000 + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "validate", str(recipe)],
        check=False,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "SRT_MAX_RECIPE_BYTES": "4096"},
    )
    assert out.returncode == 2
    assert "refusing more than 4096" in out.stdout + out.stderr
    assert bounds.DEFAULT_MAX_RECIPE_BYTES == 16 * 1024 * 1024
