"""Issue 18 item 13 (H11): parsing is bounded: size limit, duplicate keys in JSON, NUL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from srt_services.errors import RecipeInvalid
from srt_services.recipe import bounds
from srt_services.testing import kit


def _load(path: Path) -> None:
    kit.load(kit.isolated_plugins(), path)


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
import pathlib, resource, sys
from srt_services.app import compose
from srt_services.errors import SrtError
from srt_services.checking import load  # imported before the measure starts
from srt_services.testing import kit
plugins = kit.isolated_plugins()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    kit.load(plugins, pathlib.Path(sys.argv[1]))
    outcome = "loaded"
except SrtError as exc:
    outcome = str(exc).splitlines()[0]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
grown = (peak - before) * 1024
print(grown)
print(outcome)
print(peak * 1024)
"""


def _measure(path: Path) -> tuple[int, str, int]:
    """Loading ``path`` in a fresh interpreter: bytes grown, the outcome, peak RSS bytes."""
    out = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    grown, outcome, peak = out.stdout.splitlines()[:3]
    return int(grown), outcome, int(peak)


def _peak(path: Path) -> tuple[int, str]:
    grown, outcome, _ = _measure(path)
    return grown, outcome


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


# ------------------------------------------------------ H17: invalid recipes, same bound

WRONG = {
    # a list of wrong-typed items (true where text is expected)
    "items": (HEAD + "    args: [{}]\n", "true", "abcd"),
    # one wrong-typed field in each of many service entries
    "entries": ("schema: 2\nname: m\nservices:\n{}\n", "x", "1"),
    # valid in shape, refused by a rule: one unknown placeholder per word
    "rules": (HEAD + "    args: [{}]\n", '"{nope}"', '"{job_name}"'),
}


def _written(kind: str, value: str, count: int) -> str:
    template = WRONG[kind][0]
    if kind == "entries":
        return template.format(
            "\n".join(f"  - {{name: s{i}, command: [x], nodes: {value}}}" for i in range(count))
        )
    return template.format(", ".join([value] * count))


@pytest.mark.parametrize("kind", ["items", "rules"])
def test_H17_many_wrong_values_give_the_first_problems_and_the_total(
    tmp_path: Path, kind: str
) -> None:
    """H17: 200,000 wrong values give at most 100 located problems, each with its field and
    line, and one line counting the rest; the total is stated."""
    recipe = tmp_path / "wrong.yaml"
    recipe.write_text(_written(kind, WRONG[kind][1], 200_000))
    with pytest.raises(RecipeInvalid) as err:
        _load(recipe)
    lines = str(err.value).splitlines()
    located = [line for line in lines if "services[a].args[" in line]
    assert 0 < len(located) <= 100
    assert all(line.startswith(f"{recipe}:6:") for line in located), located[:3]
    assert lines[-2].endswith(f"and {200_000 - len(located)} more problems like these")
    assert lines[-1] == f"{recipe}: 200000 errors"


def test_H17_wrong_fields_in_many_entries_are_counted_not_built(tmp_path: Path) -> None:
    recipe = tmp_path / "wrong.yaml"
    recipe.write_text(_written("entries", "x", 20_000))
    with pytest.raises(RecipeInvalid) as err:
        _load(recipe)
    lines = str(err.value).splitlines()
    assert lines[0] == f"{recipe}:4:30: services[s0].nodes: must be a whole number, got 'x'"
    assert len([line for line in lines if ".nodes: must be a whole number" in line]) == 100
    assert lines[-1] == f"{recipe}: 20000 errors"


def _peak_total(path: Path) -> tuple[int, str]:
    _, outcome, peak = _measure(path)
    return peak, outcome


@pytest.mark.parametrize(("kind", "count"), [("items", 200_000), ("entries", 20_000)])
def test_H17_an_invalid_recipe_costs_about_what_a_valid_one_of_its_size_does(
    tmp_path: Path, kind: str, count: int
) -> None:
    """H17: refusing 200,000 wrong values took ~30x the memory of loading as many right
    ones (pydantic's error per value, then a problem each); now within 3x (peak RSS of a
    fresh interpreter loading each, measured side by side)."""
    _template, wrong, right = WRONG[kind]
    bad, good = tmp_path / "bad.yaml", tmp_path / "good.yaml"
    bad.write_text(_written(kind, wrong, count))
    good.write_text(_written(kind, right, count))
    good_peak, good_outcome = _peak_total(good)
    bad_peak, bad_outcome = _peak_total(bad)
    assert good_outcome == "loaded", good_outcome
    assert bad_outcome.startswith(f"{bad}:"), bad_outcome
    assert bad_peak < 3 * good_peak, f"invalid {bad_peak >> 20} MiB, valid {good_peak >> 20} MiB"
