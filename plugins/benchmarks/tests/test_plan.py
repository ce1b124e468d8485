"""What each benchmark kind plans: the client's argv and environment, from srtctl's keys,
and every wrong setting refused at its YAML line before anything starts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jobtext import JOB, client  # type: ignore[import-not-found]
from srt_benchmarks.flags import from_argv, to_argv
from srt_benchmarks.options import GpqaOptions, Gsm8kOptions, SaBenchOptions
from srt_services.extend import Plan


def bench(block: str) -> str:
    return f"{JOB}{block}"


def test_sa_bench_runs_the_runner_with_srtctls_settings(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(
        bench(
            "benchmark:\n  type: sa-bench\n"
            "  options: {isl: 128, osl: 16, concurrencies: 1x4, req_rate: 50}\n"
        )
    )
    inst = client(plan)
    assert inst.argv[1:4] == ["-m", "srt_benchmarks", "sa-bench"]
    assert "python" in inst.argv[0]  # {python}: the interpreter srt runs under
    words = inst.argv[4:]
    options = from_argv(SaBenchOptions, words)
    assert isinstance(options, SaBenchOptions)
    assert (options.isl, options.osl, options.concurrencies) == (128, 16, [1, 4])
    assert options.req_rate == 50.0
    # srtctl's defaults
    assert (options.random_range_ratio, options.num_prompts_mult, options.num_warmup_mult) == (
        0.8,
        10,
        2,
    )
    # resolved at plan time: the model name and the tokenizer directory it reads
    assert options.model == "tiny"
    assert options.tokenizer == "/models/tiny"
    assert "--concurrencies" in words and words[words.index("--concurrencies") + 1] == "1x4"
    assert inst.env["SRT_FRONTEND_URL"] == "http://127.0.0.1:8123"
    assert inst.env["SRT_BENCHMARK_RESULT"] == "/jobs/j/benchmark.json"
    assert inst.env["PYTHONUNBUFFERED"] == "1"
    unit = plan.unit("benchmark")
    assert unit.terminal and unit.category == "benchmark"


def test_numbers_written_as_text_in_the_list_are_numbers_as_in_srtctl(
    srt_plan: Callable[..., Plan], srt_problem: Callable[..., Any]
) -> None:
    """Two published srtctl TRTLLM recipes write ``concurrencies: ['2048']``; srtctl runs
    them, so srt loads them too. Text that is not a number is still refused at its line."""
    plan = srt_plan(
        bench(
            "benchmark:\n  type: sa-bench\n  options: {isl: 8, osl: 8, concurrencies: ['2048', 4]}\n"
        )
    )
    options = from_argv(SaBenchOptions, client(plan).argv[4:])
    assert isinstance(options, SaBenchOptions)
    assert options.concurrencies == [2048, 4]
    p = srt_problem(
        bench("benchmark:\n  type: sa-bench\n  options: {isl: 8, osl: 8, concurrencies: ['x']}\n")
    )
    assert p.label == "benchmark.options.concurrencies[0]"


def test_in_a_container_the_runner_is_the_images_python3(srt_plan: Callable[..., Plan]) -> None:
    """The host interpreter's path (``{python}``) does not exist inside an image."""
    block = "benchmark: {type: gpqa, container: bench:1}\n"
    assert client(srt_plan(bench(block))).argv[:3] == ["python3", "-m", "srt_benchmarks"]
    plain = client(srt_plan(bench("benchmark: {type: gpqa}\n"))).argv[0]
    assert plain != "python3" and plain.endswith(("python", "python3"))


def test_custom_tokenizer_is_srtctls_name_for_the_tokenizer(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(
        bench(
            "benchmark: {type: sa-bench, options: {isl: 8, osl: 8, concurrencies: [2],"
            " custom_tokenizer: /tok}}\n"
        )
    )
    options = from_argv(SaBenchOptions, client(plan).argv[4:])
    assert isinstance(options, SaBenchOptions)
    assert options.tokenizer == "/tok" and options.custom_tokenizer is None


def test_without_a_served_name_the_runner_asks_the_frontend(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(bench("benchmark: {type: gsm8k}\n").replace(", served_model_name: tiny", ""))
    argv = client(plan).argv
    assert "--model" not in argv
    options = from_argv(Gsm8kOptions, argv[4:])
    assert isinstance(options, Gsm8kOptions)
    assert (options.max_tokens, options.num_shots, options.num_threads) == (256, 5, 128)
    assert options.dataset_path is None  # the built-in sample


def test_gpqa_defaults_are_srtctls(srt_plan: Callable[..., Plan]) -> None:
    plan = srt_plan(
        bench("benchmark: {type: gpqa, options: {num_examples: 3, dataset_path: /d/g.jsonl}}\n")
    )
    argv = client(plan).argv
    assert argv[3] == "gpqa"
    options = from_argv(GpqaOptions, argv[4:])
    assert isinstance(options, GpqaOptions)
    assert (options.max_tokens, options.repeat, options.num_threads) == (32768, 8, 128)
    assert (options.num_examples, options.dataset_path) == (3, "/d/g.jsonl")


@pytest.mark.parametrize(
    ("block", "label", "line", "needle"),
    [
        (
            "benchmark:\n  type: gsm8k-bench\n",
            "benchmark.type",
            (8, 3),
            "'gsm8k-bench' is not a known benchmark",
        ),
        (
            "benchmark:\n  type: sa-bench\n  options: {isl: 8, osl: 8}\n",
            "benchmark.options.concurrencies",
            (9, 3),
            "is required",
        ),
        (
            "benchmark:\n  type: sa-bench\n  options:\n    isl: 0\n    osl: 8\n"
            "    concurrencies: [1]\n",
            "benchmark.options.isl",
            (10, 5),
            "must be at least 1, got 0",
        ),
        (
            "benchmark:\n  type: sa-bench\n  options:\n    isl: 8\n    osl: 8\n"
            "    concurrencies: 1x2xq\n",
            "benchmark.options.concurrencies",
            (12, 5),
            "AxBxC",
        ),
        (
            "benchmark:\n  type: sa-bench\n  options:\n    isl: 8\n    osl: 8\n"
            "    concurrencies: [1]\n    req_rate: -3\n",
            "benchmark.options.req_rate",
            (13, 5),
            "positive number or `inf`",
        ),
        (
            "benchmark:\n  type: gsm8k\n  options:\n    num_shot: 3\n",
            "benchmark.options.num_shot",
            (10, 5),
            "",
        ),
        (
            "benchmark:\n  type: gpqa\n  options:\n    num_threads: 0\n",
            "benchmark.options.num_threads",
            (10, 5),
            "must be at least 1, got 0",
        ),
        (
            "benchmark:\n  type: sa-bench\n  command: [x]\n"
            "  options: {isl: 8, osl: 8, concurrencies: [1]}\n",
            "benchmark.command",
            (9, 3),
            "builds its own command",
        ),
    ],
)
def test_wrong_settings_are_refused_at_their_line(
    srt_problem: Callable[..., Any], block: str, label: str, line: tuple[int, int], needle: str
) -> None:
    p = srt_problem(bench(block))
    assert p.label == label
    assert (p.line, p.column) == line
    assert needle in p.message


def test_gsm8k_bench_is_refused_naming_the_known_benchmarks(
    srt_problem: Callable[..., Any],
) -> None:
    """srtctl accepts ``gsm8k-bench`` and fails after the workers started; srt refuses it
    at load, at its YAML word."""
    p = srt_problem(bench("benchmark: {type: gsm8k-bench}\n"))
    assert (p.label, p.line, p.column) == ("benchmark.type", 7, 13)
    for known in ("sa-bench", "gsm8k", "gpqa"):
        assert known in p.message


def test_a_benchmark_without_a_frontend_is_refused(srt_problem: Callable[..., Any]) -> None:
    text = "schema: 2\nname: b\nbenchmark: {type: gpqa}\n"
    p = srt_problem(text)
    assert p.label == "benchmark.type"
    assert "needs a frontend" in p.message


def test_sa_bench_needs_a_tokenizer_when_the_model_is_unknown(
    srt_problem: Callable[..., Any],
) -> None:
    text = bench("benchmark: {type: sa-bench, options: {isl: 8, osl: 8, concurrencies: [1]}}\n")
    p = srt_problem(text.replace("model: /models/tiny, ", ""))
    assert p.label == "benchmark.options.tokenizer"


# --------------------------------------------------------------------------- fuzz

WORD = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
).filter(lambda s: s.strip() == s and "{" not in s and "}" not in s)

SA = st.fixed_dictionaries(
    {
        "isl": st.integers(1, 1 << 20),
        "osl": st.integers(1, 1 << 20),
        "concurrencies": st.one_of(
            st.lists(st.integers(1, 65536), min_size=1, max_size=5),
            st.lists(st.integers(1, 65536), min_size=1, max_size=5).map(
                lambda xs: "x".join(map(str, xs))
            ),
        ),
    },
    optional={
        "req_rate": st.one_of(st.just("inf"), st.floats(0.001, 1e6), st.integers(1, 10**6)),
        "random_range_ratio": st.floats(0, 1),
        "num_prompts_mult": st.integers(1, 100),
        "num_warmup_mult": st.integers(0, 10),
        "use_chat_template": st.booleans(),
        "tokenizer": WORD,
        "model": WORD,
        "seed": st.integers(-(2**31), 2**31),
        "max_failed_ratio": st.floats(0, 1),
    },
)


@settings(max_examples=150, deadline=None)
@given(raw=SA)
def test_fuzz_sa_bench_options_survive_the_argv_round_trip(raw: dict[str, Any]) -> None:
    options = SaBenchOptions.model_validate(raw)
    again = from_argv(SaBenchOptions, to_argv(options))
    assert again == options


ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(
    [
        "isl",
        "osl",
        "concurrencies",
        "req_rate",
        "num_examples",
        "max_tokens",
        "num_threads",
        "repeat",
        "num_shots",
        "dataset_path",
        "temperature",
        "top_p",
        "top_k",
        "seed",
        "trace_file",
        "mooncake_workload",
        "ttft_threshold_ms",
        "itl_threshold_ms",
        "block_size",
        "synthetic_requests",
        "aiperf_package",
        "bogus",
    ]
)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    kind=st.sampled_from(["sa-bench", "gsm8k", "gpqa", "mooncake-router", "trace-replay"]),
    options=st.dictionaries(KEYS, ANY, max_size=5),
)
def test_fuzz_any_options_load_or_are_refused_with_a_located_error(
    srt_plugins: Any, kind: str, options: dict[str, Any]
) -> None:
    """Whatever the options, srt either plans the benchmark or names a field at a line:
    never a traceback."""
    from srt_services.testing import RecipeError, kit

    doc = {
        "engine": {"model": "/models/tiny"},
        "frontend": {"type": "vllm", "command": ["front"]},
        "roles": {"agg": {"command": ["worker"]}},
        "benchmark": {"type": kind, "options": options},
        "observability": {"metrics": False},
    }
    try:
        plan = kit.plan(srt_plugins, doc, local=True)
    except RecipeError as exc:
        errors = exc.errors
    else:
        assert plan.unit("benchmark").instances[0].argv[3] == kind
        return
    assert errors
    for p in errors:
        assert p.line is not None, p
        assert p.label.startswith("benchmark"), p
