"""Override/zip/sweep expansion rules (doc §2) on small inline files."""

from __future__ import annotations

import pytest
from srt_srtctl.errors import RecipeError
from srt_srtctl.sweeps import deep_merge, expand_variants, select_variants


def _file(**sections: object) -> dict[str, object]:
    return {"base": {"name": "job", "a": {"x": 1, "y": 2}, "l": [1, 2]}, **sections}


def test_merge_recurses_replaces_lists_and_null_deletes() -> None:
    merged = deep_merge(
        {"a": {"x": 1, "y": 2}, "l": [1, 2], "k": 3}, {"a": {"y": 5, "z": 6}, "l": [9], "k": None}
    )
    assert merged == {"a": {"x": 1, "y": 5, "z": 6}, "l": [9]}
    assert list(merged["a"]) == ["x", "y", "z"]  # base key order kept, new keys appended


def test_override_variant_name_and_suffix() -> None:
    variants = expand_variants(_file(override_fast={"a": {"x": 10}}))
    assert [v.selector for v in variants] == ["base", "override_fast"]
    fast = variants[1]
    assert fast.suffix == "fast"
    assert fast.config["name"] == "job_fast"
    assert fast.config["a"] == {"x": 10, "y": 2}
    assert fast.config_file_name == "config_fast.yaml"


def test_override_keeps_explicit_name() -> None:
    (_, v) = expand_variants(_file(override_b={"name": "custom"}))
    assert v.config["name"] == "custom"


def test_zip_broadcast_and_list_of_lists() -> None:
    variants = expand_variants(
        _file(zip_override_g={"a": {"x": [1, 2, 3], "y": [7]}, "l": [[5], [6], [7, 8]]})
    )
    zipped = [v for v in variants if v.selector != "base"]
    assert [v.selector for v in zipped] == [
        "zip_override_g[0]",
        "zip_override_g[1]",
        "zip_override_g[2]",
    ]
    assert [v.config["a"] for v in zipped] == [{"x": 1, "y": 7}, {"x": 2, "y": 7}, {"x": 3, "y": 7}]
    assert [v.config["l"] for v in zipped] == [[5], [6], [7, 8]]
    assert [v.config["name"] for v in zipped] == ["job_g_0", "job_g_1", "job_g_2"]
    assert [v.suffix for v in zipped] == ["g_0", "g_1", "g_2"]


def test_zip_null_element_deletes_for_that_variant_only() -> None:
    variants = expand_variants(_file(zip_override_g={"a": {"x": [None, 4]}}))
    assert variants[1].config["a"] == {"y": 2}
    assert variants[2].config["a"] == {"x": 4, "y": 2}


def test_zip_list_valued_name() -> None:
    variants = expand_variants(_file(zip_override_g={"name": ["p", "q"], "a": {"x": [1, 2]}}))
    assert [v.config["name"] for v in variants[1:]] == ["p", "q"]


def test_zip_incompatible_lengths() -> None:
    with pytest.raises(RecipeError, match="Incompatible zip lengths"):
        expand_variants(_file(zip_override_g={"a": {"x": [1, 2], "y": [1, 2, 3]}}))


def test_zip_empty_list_rejected() -> None:
    with pytest.raises(RecipeError) as err:
        expand_variants(_file(zip_override_g={"a": {"x": []}}))
    assert err.value.problems[0].path == ("zip_override_g", "a", "x")


def test_default_selection_excludes_base_and_sorts() -> None:
    variants = expand_variants(_file(zip_override_b={"a": {"x": [1, 2]}}, override_a={"k": 1}))
    chosen = select_variants(variants)
    assert [v.selector for v in chosen] == ["override_a", "zip_override_b[0]", "zip_override_b[1]"]


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ("base", ["base"]),
        ("override_a", ["override_a"]),
        ("zip_override_b", ["zip_override_b[0]", "zip_override_b[1]"]),
        ("zip_override_b[1]", ["zip_override_b[1]"]),
        ("zip_*", ["zip_override_b[0]", "zip_override_b[1]"]),
    ],
)
def test_selectors(selector: str, want: list[str]) -> None:
    variants = expand_variants(_file(zip_override_b={"a": {"x": [1, 2]}}, override_a={"k": 1}))
    assert [v.selector for v in select_variants(variants, selector)] == want


def test_unknown_selector() -> None:
    with pytest.raises(RecipeError, match="no variant matches"):
        select_variants(expand_variants(_file(override_a={})), "override_zzz")


def test_plain_recipe_is_one_variant() -> None:
    variants = expand_variants({"name": "x", "model": {}})
    assert len(variants) == 1
    assert variants[0].selector is None
    assert select_variants(variants) == variants


def test_sweep_cartesian_product() -> None:
    variants = expand_variants(
        {
            "name": "s",
            "sweep": {"isl": [1, 2], "tp": [4]},
            "benchmark": {"isl": "{isl}", "note": "tp={tp}"},
        }
    )
    assert [v.config["name"] for v in variants] == ["s_isl1_tp4", "s_isl2_tp4"]
    assert variants[1].config["benchmark"] == {"isl": "2", "note": "tp=4"}
    assert "sweep" not in variants[0].config
