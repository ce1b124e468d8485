"""Every variant of every recipe in tests/data, loaded and planned by srt (the srtctl format,
core, the engines), is the job srtctl built: nodes, workers and their GPUs, modules, flags,
the recipe's environment, frontends, benchmark. srt's deliberate differences are allowed
only by name (oracle.DIFFERENCES, each listed in docs/differences.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from oracle import (  # type: ignore[import-not-found]
    DIFFERENCES,
    UNSUPPORTED,
    build_variants,
    compare,
    load_expected,
    plugins,
    recipes,
)

RECIPES = recipes()
DOCS = Path(__file__).resolve().parents[3] / "docs" / "differences.md"


@pytest.fixture(scope="module")
def found() -> Any:
    return plugins()


def test_data_present() -> None:
    assert len(RECIPES) >= 36


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_plans_as_srtctl_built_it(recipe: str, found: Any) -> None:
    expected = load_expected(recipe)
    by_selector = {v["selector"]: v for v in expected["variants"]}
    built = list(build_variants(recipe, found))
    failures = []
    for b in built:
        reason = UNSUPPORTED.get((recipe, b.selector))
        if reason is not None:
            # still refused: the day srt plans it, this entry must go (and be compared)
            assert b.plan is None, f"{recipe} [{b.selector}] plans now: remove it from UNSUPPORTED"
            continue
        assert b.selector in by_selector, f"srt's variant {b.selector} is not srtctl's"
        exp = by_selector[b.selector]
        result = compare(b, exp, exp["summary"].get("served_model_name"))
        assert result.used <= DIFFERENCES.keys()
        failures += [f"[{b.selector}] {p}" for p in result.problems]
    if not any((recipe, b.selector) in UNSUPPORTED for b in built):
        assert sorted(str(b.selector) for b in built) == sorted(str(s) for s in by_selector)
    assert not failures, "\n".join(failures)


def test_every_allowed_difference_is_documented() -> None:
    text = DOCS.read_text()
    missing = [name for name in DIFFERENCES if f"`{name}`" not in text]
    assert not missing, f"not in docs/differences.md: {missing}"
