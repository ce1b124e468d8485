"""Every variant of every recipe in the oracle data must build exactly what srtctl built."""

from __future__ import annotations

import pytest
from oracle import (  # type: ignore[import-not-found]
    FIELDS,
    build_variants,
    compare,
    load_expected,
    recipes,
    summary,
)

RECIPES = recipes()


def test_data_present() -> None:
    assert len(RECIPES) >= 36


@pytest.mark.parametrize("recipe", RECIPES)
def test_recipe_matches_oracle(recipe: str) -> None:
    expected = load_expected(recipe)
    by_selector = {v["selector"]: v for v in expected["variants"]}
    built = list(build_variants(recipe))
    assert [s for s, _ in built] == [v["selector"] for v in expected["variants"]]
    failures = []
    for selector, plan in built:
        if isinstance(plan, Exception):
            failures.append(f"[{selector}] build failed: {plan!r}")
            continue
        for field, problems in compare(plan, by_selector[selector]).items():
            failures.extend(f"[{selector}] {field}: {p}" for p in problems[:3])
    assert not failures, "\n".join(failures)


def test_summary_per_field(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints the per-field match table (pytest -s shows it) and fails on any mismatch."""
    counts, examples, total = summary()
    with capsys.disabled():
        print(f"\nsrtctl oracle: {total} variants")
        for field in FIELDS:
            print(f"  {field:18s} {total - counts[field]:3d}/{total}")
    assert all(c == 0 for c in counts.values()), {f: examples[f][:2] for f in FIELDS if counts[f]}
