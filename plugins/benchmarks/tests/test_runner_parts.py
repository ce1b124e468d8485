"""The runner's pure parts: grading, the built-in samples, percentiles, argv parsing, and
the usage errors it exits 2 with before sending anything."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from srt_benchmarks import accuracy
from srt_benchmarks.__main__ import main
from srt_benchmarks.flags import from_argv
from srt_benchmarks.options import GpqaOptions, Gsm8kOptions, SaBenchOptions
from srt_benchmarks.stats import percentile, summary


@pytest.mark.parametrize(
    ("reply", "number"),
    [
        ("so 84 - 50 = 34 rolls", "34"),
        ("The answer is 1,525.", "1525"),
        ("It costs 24.00 dollars", "24"),
        ("-3 degrees", "-3"),
        ("no idea", ""),
        ("", ""),
    ],
)
def test_gsm8k_takes_the_last_number(reply: str, number: str) -> None:
    assert accuracy.grade("gsm8k", reply) == number


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("Reasoning...\nAnswer: C", "C"),
        ("answer: (b)", "B"),
        ("Answer: A. Wait. Answer: D", "D"),
        ("I think C", ""),
    ],
)
def test_gpqa_takes_the_letter_after_answer(reply: str, letter: str) -> None:
    assert accuracy.grade("gpqa", reply) == letter


def test_builtin_samples_grade_their_own_solutions() -> None:
    """Each shipped gsm8k solution grades as right against its own answer, and each gpqa
    question's correct choice sits at the letter the grader expects."""
    items, where = accuracy.read_items(None, "gsm8k")
    assert where == "built-in gsm8k sample" and len(items) == 8
    questions = accuracy.gsm8k_questions(items, Gsm8kOptions(num_shots=2))
    for item, q in zip(items, questions, strict=True):
        assert accuracy.grade("gsm8k", item["answer"]) == q.expected != ""
        assert q.prompt.count("Question:") == 3
    items, _ = accuracy.read_items(None, "gpqa")
    for item, q in zip(items, accuracy.gpqa_questions(items, GpqaOptions()), strict=True):
        line = next(x for x in q.prompt.splitlines() if x.startswith(f"{q.expected}) "))
        assert line == f"{q.expected}) {item['correct_answer']}"


def test_a_broken_dataset_is_named_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"question": "q", "answer": "#### 1"}) + "\n{oops\n")
    with pytest.raises(SystemExit, match=r"d\.jsonl line 2: not JSON"):
        accuracy.read_items(str(path), "gsm8k")
    with pytest.raises(SystemExit, match="cannot read dataset_path"):
        accuracy.read_items(str(tmp_path / "missing.jsonl"), "gpqa")


def test_percentiles_interpolate_like_numpy() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 50) == 2.5
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))
    assert summary([]) == dict.fromkeys(["mean", "min", "max", "p50", "p90", "p99"])
    assert summary([0.001, 0.003])["p50"] == pytest.approx(2.0)


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.text(max_size=10), max_size=8),
    kind=st.sampled_from([SaBenchOptions, Gsm8kOptions, GpqaOptions]),
)
def test_fuzz_argv_parsing_accepts_or_refuses_cleanly(words: list[str], kind: type) -> None:
    try:
        from_argv(kind, words)
    except (ValueError, ValidationError):
        pass


def test_usage_errors_exit_2_before_any_request(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SRT_FRONTEND_URL", raising=False)
    assert main(["nope"]) == 2
    assert main(["sa-bench", "--isl", "0", "--osl", "1", "--concurrencies", "1"]) == 2
    assert main(["gsm8k", "--bogus", "1"]) == 2
    assert main(["gsm8k"]) == 2
    assert "SRT_FRONTEND_URL is not set" in capsys.readouterr().err
