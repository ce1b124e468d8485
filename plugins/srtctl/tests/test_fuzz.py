"""Fuzzed srtctl recipes never crash the reader: a mutated recipe is either a job srt can
check or a located refusal (RecipeError), never a traceback from the format's translation."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle import data_dir, plugins  # type: ignore[import-not-found]
from srt_services.testing import RecipeError, kit

FOUND = plugins()
SEEDS = [
    yaml.safe_load((data_dir() / "recipes" / name).read_text())
    for name in (
        "mocker/agg.yaml",
        "qwen3-32b/disagg-kv-dynamo.yaml",
        "vllm/qwen3-32b/agg-round-robin.yaml",
        "trtllm/b300-fp4/8k1k/stp/ctx1_gen4_tep4_batch2_eplb0_mtp0.yaml",
        "b200-fp4/1k1k.yaml",
    )
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=100_000),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["sglang", "vllm", "trtllm", "mocker", "dynamo", "trtllm_serve", "hf:x/y"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(tree: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            out += _paths(value, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> str:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["set", "delete", "add"]))
        if action == "delete" and isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=8))] = draw(values)
        else:
            parent[path[-1]] = draw(values)
    return yaml.safe_dump(doc, sort_keys=False)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_a_mutated_recipe_is_checked_or_refused_never_a_traceback(text: str) -> None:
    refused: RecipeError | None = None
    try:
        found = kit.load_variants(FOUND, "fuzz.yaml", text=text)
    except RecipeError as exc:
        refused, found = exc, []
    assert found or (refused is not None and refused.problems)
