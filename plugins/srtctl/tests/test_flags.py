"""Config dict -> CLI flag rules (doc §6)."""

from __future__ import annotations

from srt_srtctl.flags import config_to_flags, lookup, verbatim_args


def test_sorted_and_underscores() -> None:
    assert config_to_flags({"b_key": 1, "a-key": "x"}) == ["--a-key", "x", "--b-key", "1"]


def test_true_bare_false_and_none_omitted() -> None:
    assert config_to_flags({"on": True, "off": False, "gone": None}) == ["--on"]


def test_list_is_separate_items() -> None:
    assert config_to_flags({"cuda-graph-bs": [1, 2, 4]}) == ["--cuda-graph-bs", "1", "2", "4"]


def test_nested_dict_is_python_repr() -> None:
    assert config_to_flags({"cfg": {"a": 1, "b": "x"}}) == ["--cfg", "{'a': 1, 'b': 'x'}"]


def test_float_and_string_json_pass_through() -> None:
    assert config_to_flags({"mem": 0.90, "j": '{"a":1}'}) == ["--j", '{"a":1}', "--mem", "0.9"]


def test_drop_matches_either_spelling() -> None:
    assert config_to_flags(
        {"served_model_name": "m", "nccl-port": 1, "tp": 2}, drop=["served-model-name", "nccl_port"]
    ) == ["--tp", "2"]


def test_duplicates_are_kept_by_caller() -> None:
    flags = [
        "--disaggregation-mode",
        "prefill",
        *config_to_flags({"disaggregation-mode": "prefill"}),
    ]
    assert flags.count("--disaggregation-mode") == 2


def test_frontend_args_verbatim_unsorted() -> None:
    assert verbatim_args({"router_mode": "kv", "a": True, "b": False}) == [
        "--router_mode",
        "kv",
        "--a",
    ]


def test_lookup_both_spellings() -> None:
    assert lookup({"served_model_name": "x"}, "served-model-name") == "x"
    assert lookup(None, "x") is None
