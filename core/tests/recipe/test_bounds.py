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


# ---------------------------------------------------------------------------- H17: memory

HEAD = "schema: 2\nname: m\nservices:\n  - name: a\n    command: [sleep]\n"

#: Peak memory of loading a recipe, measured in a fresh interpreter (ru_maxrss grows only).
MEASURE = """
import resource, sys
from srt_services.errors import SrtError
from srt_services.plugins.manager import PluginSet
from srt_services.recipe.load import load_recipe
plugins = PluginSet(autoload=False)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_recipe(sys.argv[1], plugins)
    outcome = "loaded"
except SrtError as exc:
    outcome = str(exc).splitlines()[0]
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
print(grown)
print(outcome)
"""


def _peak(path: Path) -> tuple[int, str]:
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    grown, outcome = out.stdout.splitlines()[:2]
    return int(grown), outcome


@pytest.mark.parametrize(
    ("name", "body"),
    [
        # one short word per value, just above the density srt accepts: it loads
        ("words", "    args: [" + ", ".join(["abcd"] * 700_000) + "]\n"),
        # a mapping of many distinct keys
        ("keys", "    env:\n" + "".join(f"      K{i:07d}: v\n" for i in range(250_000))),
        # aliases: every item is the same anchored list, shared rather than copied
        (
            "aliases",
            "    args: [&w word]\n    env: {A: &x one}\n    srun_options: {}\n    preamble: |\n"
            + "".join(f"      # line {i} of a long preamble\n" for i in range(150_000)),
        ),
    ],
)
def test_H17_a_large_recipe_costs_a_small_factor_of_its_size(
    tmp_path: Path, name: str, body: str
) -> None:
    """H17: a recipe of several MB under the size limit loads within 20x its size (it was
    1.3 GB for 6 MB: PyYAML's node tree costs ~300 bytes per value, its marks included)."""
    recipe = tmp_path / f"{name}.yaml"
    recipe.write_text(HEAD + body)
    size = recipe.stat().st_size
    assert size > 3_000_000
    grown, outcome = _peak(recipe)
    assert outcome == "loaded", outcome
    assert grown <= 20 * size, f"{grown / size:.1f}x its size"


@pytest.mark.parametrize(
    "body",
    [
        "    args: [" + ",".join(["a"] * 3_000_000) + "]\n",
        "    args: [" + ",".join(["[a]"] * 1_500_000) + "]\n",
        "    args: [" + ",".join(["{}"] * 2_000_000) + "]\n",
    ],
)
def test_H17_a_dense_recipe_is_refused_before_it_is_built(tmp_path: Path, body: str) -> None:
    """H17: more values than a recipe of that size can hold is refused while it is read
    (the 1.5 million wrong items of the second case cost 2.7 GB of validation errors)."""
    recipe = tmp_path / "dense.yaml"
    recipe.write_text(HEAD + body)
    size = recipe.stat().st_size
    grown, outcome = _peak(recipe)
    assert "refusing to load it" in outcome and "values in" in outcome, outcome
    assert ":6:" in outcome, "the message names the line"
    assert grown <= 20 * size


def test_H17_a_dense_json_recipe_is_refused_too(tmp_path: Path) -> None:
    recipe = tmp_path / "dense.json"
    doc = {
        "schema": 2,
        "name": "m",
        "services": [{"name": "a", "command": ["x"], "args": [1] * 1_000_000}],
    }
    recipe.write_text(json.dumps(doc, separators=(",", ":")))
    with pytest.raises(RecipeInvalid, match="refusing to load it"):
        _load(recipe)


def test_H17_only_the_first_problems_are_located_the_rest_counted(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_text(HEAD + "    args: [" + ", ".join(["[x]"] * 500) + "]\n")
    with pytest.raises(RecipeInvalid) as err:
        _load(recipe)
    lines = str(err.value).splitlines()
    assert len([line for line in lines if "must be text" in line]) == 100
    assert any(line.endswith("and 400 more problems like these") for line in lines)
