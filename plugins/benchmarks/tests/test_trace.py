"""mooncake-router and trace-replay: what they plan from srtctl's keys, every wrong setting
refused at its YAML line, and the trace side of the runner (reading, the synthetic trace,
prompts that share prefixes where the trace's block hashes do, goodput)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jobtext import JOB, client  # type: ignore[import-not-found]
from srt_benchmarks.__main__ import main
from srt_benchmarks.flags import from_argv, to_argv
from srt_benchmarks.options import MooncakeRouterOptions, TraceReplayOptions
from srt_benchmarks.serving import Outcome
from srt_benchmarks.trace import Record, build_prompts, goodput, read_trace, synthetic_trace
from srt_services.extend import Plan
from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def client_argv(plan: Plan) -> list[str]:
    return list(client(plan).argv)


def test_mooncake_router_plans_with_srtctls_defaults(srt_plan: Callable[..., Plan]) -> None:
    """srtctl: ``bench.sh URL NAME WORKLOAD(conversation) TTFT(2000) ITL(25) TOKENIZER``."""
    argv = client_argv(srt_plan(JOB + "benchmark: {type: mooncake-router}\n"))
    assert argv[1:4] == ["-m", "srt_benchmarks", "mooncake-router"]
    options = from_argv(MooncakeRouterOptions, argv[4:])
    assert isinstance(options, MooncakeRouterOptions)
    assert options.model == "tiny"
    assert options.mooncake_workload == "conversation"
    assert (options.ttft_threshold_ms, options.itl_threshold_ms) == (2000, 25)
    assert options.tokenizer == "/models/tiny"  # srtctl's TOKENIZER: the model's path
    assert options.trace_file is None and options.block_size == 512


def test_mooncake_router_takes_the_recipes_settings(srt_plan: Callable[..., Plan]) -> None:
    block = (
        "benchmark:\n  type: mooncake-router\n  options: {mooncake_workload: toolagent,"
        " ttft_threshold_ms: 5000, itl_threshold_ms: 50, trace_file: /t/tool.jsonl,"
        " tokenizer: /tok}\n"
    )
    options = from_argv(MooncakeRouterOptions, client_argv(srt_plan(JOB + block))[4:])
    assert isinstance(options, MooncakeRouterOptions)
    assert (options.mooncake_workload, options.trace_file, options.tokenizer) == (
        "toolagent",
        "/t/tool.jsonl",
        "/tok",
    )
    assert (options.ttft_threshold_ms, options.itl_threshold_ms) == (5000, 50)


def test_trace_replay_plans_srtctls_recipe(srt_plan: Callable[..., Plan]) -> None:
    """The keys of srtctl's one trace-replay recipe (mocker/kimi-trace-agg.yaml)."""
    block = (
        "benchmark:\n  type: trace-replay\n  options:\n    trace_file: /traces/d.jsonl\n"
        "    concurrencies: [4, 16]\n    ttft_threshold_ms: 3000\n    itl_threshold_ms: 7\n"
        "    aiperf_package: aiperf>=0.7.0\n"
    )
    argv = client_argv(srt_plan(JOB + block))
    assert argv[3] == "trace-replay"
    options = from_argv(TraceReplayOptions, argv[4:])
    assert isinstance(options, TraceReplayOptions)
    assert (options.trace_file, options.concurrencies) == ("/traces/d.jsonl", [4, 16])
    assert (options.ttft_threshold_ms, options.itl_threshold_ms) == (3000, 7)
    assert options.aiperf_package == "aiperf>=0.7.0"
    assert (options.model, options.tokenizer) == ("tiny", "/models/tiny")


def test_trace_replay_takes_srtctls_comma_list(srt_plan: Callable[..., Plan]) -> None:
    block = "benchmark: {type: trace-replay, options: {trace_file: /t, concurrencies: '2,8'}}\n"
    options = from_argv(TraceReplayOptions, client_argv(srt_plan(JOB + block))[4:])
    assert isinstance(options, TraceReplayOptions)
    assert options.concurrencies == [2, 8]


@pytest.mark.parametrize(
    ("block", "label", "line", "needle"),
    [
        (
            "benchmark:\n  type: trace-replay\n  options: {concurrencies: [1]}\n",
            "benchmark.options.trace_file",
            (9, 3),
            "is required",
        ),
        (
            "benchmark:\n  type: trace-replay\n  options: {trace_file: /t}\n",
            "benchmark.options.concurrencies",
            (9, 3),
            "is required",
        ),
        (
            "benchmark:\n  type: trace-replay\n  options:\n    trace_file: /t\n"
            "    concurrencies: 4,q\n",
            "benchmark.options.concurrencies",
            (11, 5),
            "AxBxC",
        ),
        (
            "benchmark:\n  type: mooncake-router\n  options:\n    mooncake_workload: chat\n",
            "benchmark.options.mooncake_workload",
            (10, 5),
            "conversation",
        ),
        (
            "benchmark:\n  type: mooncake-router\n  options:\n    ttft_threshold_ms: 0\n",
            "benchmark.options.ttft_threshold_ms",
            (10, 5),
            "greater than 0",
        ),
        (
            "benchmark:\n  type: mooncake-router\n  options:\n    aiperf_args: {x: 1}\n",
            "benchmark.options.aiperf_args",
            (10, 5),
            "",
        ),
        (
            "benchmark:\n  type: mooncake-router\n  options:\n    block_size: 0\n",
            "benchmark.options.block_size",
            (10, 5),
            "must be at least 1, got 0",
        ),
    ],
)
def test_wrong_trace_settings_are_refused_at_their_line(
    srt_problem: Callable[..., Any], block: str, label: str, line: tuple[int, int], needle: str
) -> None:
    p = srt_problem(JOB + block)
    assert p.label == label
    assert (p.line, p.column) == line
    assert needle in p.message


@pytest.mark.parametrize("kind", ["mooncake-router", "trace-replay"])
def test_trace_benchmarks_need_a_tokenizer_when_the_model_is_unknown(
    srt_problem: Callable[..., Any], kind: str
) -> None:
    extra = ", concurrencies: [1]" if kind == "trace-replay" else ""
    text = JOB + f"benchmark: {{type: {kind}, options: {{trace_file: /t{extra}}}}}\n"
    p = srt_problem(text.replace("model: /models/tiny, ", ""))
    assert p.label == "benchmark.options.tokenizer"
    assert kind in p.message


# --------------------------------------------------------------------------- the runner


def word_tokenizer(tmp_path: Path, size: int = 200) -> Path:
    """A word-level tokenizer.json: one word a token, so decoded prompts are comparable."""
    vocab = {f"w{i}": i for i in range(size)} | {"[UNK]": size}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.add_special_tokens(["[UNK]"])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


def test_the_synthetic_trace_is_deterministic_and_shares_prefixes() -> None:
    one = synthetic_trace(40, 16, seed=3)
    assert one == synthetic_trace(40, 16, seed=3)
    assert one != synthetic_trace(40, 16, seed=4)
    assert len(one) == 40
    stamps = [r.timestamp for r in one]
    assert stamps == sorted(stamps) and stamps[0] == 0
    for r in one:
        assert r.hash_ids[:2] == [0, 1]  # the shared system prompt
        assert 2 < len(r.hash_ids) <= 6
        assert r.input_length is not None
        assert (len(r.hash_ids) - 1) * 16 < r.input_length <= len(r.hash_ids) * 16
        assert 8 <= r.output_length <= 64
    # later turns repeat an earlier turn's ids and extend them
    longer = [r.hash_ids for r in one if len(r.hash_ids) > 3]
    assert any(
        other[: len(ids)] == ids
        for ids in (r.hash_ids for r in one)
        for other in longer
        if other != ids and len(ids) > 2
    )


def test_prompts_share_tokens_where_the_trace_shares_blocks(tmp_path: Path) -> None:
    tokenizer = Tokenizer.from_file(str(word_tokenizer(tmp_path)))
    records = [
        Record(input_length=10, output_length=4, hash_ids=[7, 8]),
        Record(input_length=8, output_length=4, hash_ids=[7, 9]),
        Record(input_length=6, output_length=4, hash_ids=[]),
        Record(output_length=2, text_input="w1 w2 w3"),
    ]
    a, b, c, d = build_prompts(records, tokenizer, block_size=4, seed=1)
    words_a, words_b = a.text.split(), b.text.split()
    assert len(words_a) == 10 and len(words_b) == 8 and len(c.text.split()) == 6
    assert words_a[:4] == words_b[:4]  # block 7
    assert words_a[4:8] != words_b[4:8]  # blocks 8 and 9
    assert "[UNK]" not in a.text
    assert (d.text, d.input_tokens, d.output_tokens) == ("w1 w2 w3", 3, 2)
    again = build_prompts(records, tokenizer, block_size=4, seed=1)
    assert [p.text for p in again] == [p.text for p in (a, b, c, d)]
    assert build_prompts(records, tokenizer, block_size=4, seed=2)[0].text != a.text


def test_a_trace_is_read_in_timestamp_order(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [
        {"timestamp": 500, "input_length": 3, "output_length": 2, "hash_ids": [1]},
        {"timestamp": 0, "input_length": 5, "output_length": 1, "session_id": "s"},
        {"text_input": "hello", "output_length": 3},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    records = read_trace(str(path), "trace-replay")
    assert [r.timestamp for r in records] == [0, 0, 500]
    assert records[1].text_input == "hello"


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"timestamp": 0, "output_length": 2}', "input_length"),
        ('{"input_length": 4, "output_length": 0}', "output_length"),
        ('{"input_length": 4, "output_length": 2, "hash_ids": [-1]}', "hash_ids"),
        ("not json", "t.jsonl:2"),
    ],
)
def test_a_bad_trace_line_is_named_with_its_number(tmp_path: Path, line: str, needle: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"input_length": 4, "output_length": 2}\n' + line + "\n")
    with pytest.raises(SystemExit) as err:
        read_trace(str(path), "trace-replay")
    assert f"{path}:2" in str(err.value) and needle in str(err.value)


def test_a_missing_or_empty_trace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="cannot read trace_file"):
        read_trace(str(tmp_path / "none.jsonl"), "trace-replay")
    (tmp_path / "e.jsonl").write_text("\n")
    with pytest.raises(SystemExit, match="holds no request"):
        read_trace(str(tmp_path / "e.jsonl"), "trace-replay")


def test_goodput_counts_requests_within_both_thresholds() -> None:
    outcomes = [
        Outcome(True, ttft=0.1, latency=0.1 + 9 * 0.02, output_tokens=10),  # good
        Outcome(True, ttft=0.3, latency=0.3 + 9 * 0.02, output_tokens=10),  # TTFT over
        Outcome(True, ttft=0.1, latency=0.1 + 9 * 0.03, output_tokens=10),  # ITL over
        Outcome(True, ttft=0.1, latency=0.1, output_tokens=1),  # one token: no ITL
        Outcome(False, "boom"),
    ]
    g = goodput(outcomes, 2.0, ttft_ms=200, itl_ms=25)
    assert (g["good_requests"], g["goodput"]) == (2, 1.0)


def test_trace_usage_errors_exit_2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SRT_FRONTEND_URL", raising=False)
    assert main(["trace-replay", "--trace-file", "/t", "--concurrencies", "1"]) == 2
    assert main(["trace-replay", "--concurrencies", "1"]) == 2  # no trace_file
    assert main(["mooncake-router", "--mooncake-workload", "chat"]) == 2


# --------------------------------------------------------------------------- fuzz

WORD = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12
).filter(lambda s: s.strip() == s)
COMMON: dict[str, Any] = {
    "ttft_threshold_ms": st.floats(0.001, 1e7),
    "itl_threshold_ms": st.floats(0.001, 1e7),
    "tokenizer": WORD,
    "model": WORD,
    "block_size": st.integers(1, 65536),
    "aiperf_package": WORD,
    "seed": st.integers(-(2**31), 2**31),
    "max_failed_ratio": st.floats(0, 1),
}


@settings(max_examples=120, deadline=None)
@given(
    raw=st.fixed_dictionaries(
        {},
        optional={
            **COMMON,
            "mooncake_workload": st.sampled_from(
                ["conversation", "toolagent", "synthetic", "mooncake"]
            ),
            "trace_file": WORD,
            "synthetic_requests": st.integers(1, 100000),
        },
    )
)
def test_fuzz_mooncake_router_options_survive_the_argv_round_trip(raw: dict[str, Any]) -> None:
    options = MooncakeRouterOptions.model_validate(raw)
    assert from_argv(MooncakeRouterOptions, to_argv(options)) == options


@settings(max_examples=120, deadline=None)
@given(
    raw=st.fixed_dictionaries(
        {
            "trace_file": WORD,
            "concurrencies": st.one_of(
                st.lists(st.integers(1, 65536), min_size=1, max_size=5),
                st.lists(st.integers(1, 65536), min_size=1, max_size=5).map(
                    lambda xs: ",".join(map(str, xs))
                ),
            ),
        },
        optional=COMMON,
    )
)
def test_fuzz_trace_replay_options_survive_the_argv_round_trip(raw: dict[str, Any]) -> None:
    options = TraceReplayOptions.model_validate(raw)
    assert from_argv(TraceReplayOptions, to_argv(options)) == options


@settings(max_examples=80, deadline=None)
@given(count=st.integers(1, 300), block=st.integers(1, 600), seed=st.integers())
def test_fuzz_the_synthetic_trace_has_the_count_asked_for(
    count: int, block: int, seed: int
) -> None:
    records = synthetic_trace(count, block, seed)
    assert len(records) == count
    assert all(r.input_length and r.input_length <= 6 * block for r in records)
