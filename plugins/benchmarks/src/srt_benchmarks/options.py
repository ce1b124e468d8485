"""``benchmark.options`` of each benchmark: srtctl's keys and defaults, closed models.

The names are srtctl's (``isl``, ``osl``, ``concurrencies``, ``num_examples``...), so a
recipe's ``benchmark:`` block carries over as it is; srt's own additions (``tokenizer``,
``endpoint``, ``max_failed_ratio``, ``dataset_path`` for the accuracy suites) say so in
their descriptions. Every field carries its description: the recipe reference and the
README are generated from them.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from srt_services.extend import KindOptions

PositiveInt = Annotated[int, Field(ge=1)]
Ratio = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
#: Enough for srtctl's sweeps (up to 16384 concurrent), bounded so a typo cannot ask for
#: a billion in-flight requests.
MAX_CONCURRENCY = 65536


def split_concurrencies(cls: type, value: Any) -> Any:
    """srtctl accepts ``"1x8x64"`` (and, for trace-replay, ``"1,8"``) as well as a list, and
    numbers written as text in that list (two of its published TRTLLM recipes do)."""
    if isinstance(value, str):
        words = value.replace(",", "x").split("x")
        if not all(w.strip().isdigit() for w in words):
            raise ValueError("must be a list of integers or an `AxBxC` string of them")
        return [int(w) for w in words]
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        # srtctl reads its lists leniently: ``['2048']`` (a quoted number) is 2048 there
        return [int(v) if isinstance(v, str) and v.strip().isdigit() else v for v in value]
    return value


class _Common(KindOptions):
    model: str | None = Field(
        None,
        description="The model name sent in requests (srt). Default: `engine.served_model_name`,"
        " else the only model the frontend lists at `/v1/models`.",
    )
    request_timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(
        3600.0, description="One request's time limit; a request over it counts as failed (srt)."
    )


class SaBenchOptions(_Common):
    """srtctl's ``sa-bench``: for each concurrency, ``concurrency x num_warmup_mult`` warmup
    requests, then ``concurrency x num_prompts_mult`` measured ones of ``isl`` random prompt
    tokens asking for ``osl`` output tokens."""

    isl: PositiveInt = Field(description="Input length of each prompt, in tokens.")
    osl: PositiveInt = Field(description="Output tokens asked for per request (`max_tokens`).")
    concurrencies: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] = Field(
        min_length=1,
        description="The concurrency levels, one run each: a list, or srtctl's `AxBxC` string.",
    )
    req_rate: float | Literal["inf"] = Field(
        "inf",
        description="Requests per second (Poisson arrivals), or `inf` to send at once,"
        " bounded by the concurrency.",
    )
    random_range_ratio: Ratio = Field(
        0.8,
        description="Input and output lengths are drawn from `[ratio x len, len]`"
        " (1 gives exactly `isl`/`osl`).",
    )
    num_prompts_mult: PositiveInt = Field(
        10, description="Measured requests per run: `concurrency x num_prompts_mult`."
    )
    num_warmup_mult: Annotated[int, Field(ge=0)] = Field(
        2, description="Warmup requests (not measured): `concurrency x num_warmup_mult`."
    )
    use_chat_template: bool = Field(
        True,
        description="Send `/v1/chat/completions` (the server applies the template); false"
        " sends the raw prompt to `/v1/completions`.",
    )
    dataset_name: Literal["random"] = Field(
        "random", description="Prompt source: `random` token ids (srtctl's default)."
    )
    tokenizer: str | None = Field(
        None,
        description="Directory holding the served model's `tokenizer.json`, used to build"
        " prompts of `isl` tokens (srt). Default: `custom_tokenizer`, else `engine.model`.",
    )
    custom_tokenizer: str | None = Field(
        None, description="srtctl's name for `tokenizer` (the first one set wins)."
    )
    seed: int = Field(0, description="Seed of the prompt and length draws (srt).")
    max_failed_ratio: Ratio = Field(
        0.0,
        description="The benchmark fails when the failed share of any run's measured"
        " requests is above this (srt).",
    )

    _split = field_validator("concurrencies", mode="before")(split_concurrencies)

    @field_validator("req_rate", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
            return "inf"
        if isinstance(value, bool):
            raise ValueError("must be a positive number or `inf`")
        if isinstance(value, int | float):
            if math.isinf(value) and value > 0:
                return "inf"
            if not math.isfinite(value) or value <= 0:
                raise ValueError("must be a positive number or `inf`")
        return value

    @property
    def rate(self) -> float:
        return math.inf if self.req_rate == "inf" else float(self.req_rate)


class _Accuracy(_Common):
    dataset_path: str | None = Field(
        None,
        description="A local JSON Lines file of the suite's items (srt; see the README for the"
        " fields). Default: the small sample shipped with srt-benchmarks, which shows the"
        " benchmark runs end to end, not a model's accuracy.",
    )
    num_threads: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = Field(
        128, description="Requests in flight at once."
    )
    repeat: PositiveInt = Field(1, description="Times each question is asked.")
    temperature: Annotated[float, Field(ge=0, allow_inf_nan=False)] = Field(
        0.0, description="Sampling temperature."
    )
    top_p: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] | None = Field(
        None, description="Nucleus sampling (sent only when set)."
    )
    top_k: Annotated[int, Field(ge=1)] | None = Field(
        None, description="Top-k sampling (sent only when set)."
    )
    min_accuracy: Ratio = Field(
        0.0, description="The benchmark fails when the accuracy is below this (srt)."
    )
    max_failed_ratio: Ratio = Field(
        0.0,
        description="The benchmark fails when the share of failed requests is above this (srt).",
    )


class Gsm8kOptions(_Accuracy):
    """srtctl's ``gsm8k``: grade-school word problems, scored on the last number of the
    answer, with ``num_shots`` worked examples before each question."""

    num_examples: PositiveInt | None = Field(
        None, description="Questions asked (srtctl: 1319); default: every item of the dataset."
    )
    max_tokens: PositiveInt = Field(256, description="Output tokens per answer.")
    num_shots: Annotated[int, Field(ge=0, le=32)] = Field(
        5, description="Worked examples (from the dataset) before each question."
    )


class GpqaOptions(_Accuracy):
    """srtctl's ``gpqa``: graduate-level multiple choice (A-D), scored on the letter."""

    num_examples: PositiveInt | None = Field(
        None, description="Questions asked (srtctl: 198); default: every item of the dataset."
    )
    max_tokens: PositiveInt = Field(32768, description="Output tokens per answer.")
    repeat: PositiveInt = Field(8, description="Times each question is asked (srtctl: 8).")
    num_threads: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = Field(
        128, description="Requests in flight at once."
    )


Millis = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class _Trace(_Common):
    """What both trace benchmarks share: prompts built from a Mooncake-format trace, replayed
    on the chat endpoint, with srtctl's goodput thresholds."""

    ttft_threshold_ms: Millis = Field(
        2000.0,
        description="Goodput threshold: a request counts as good when its TTFT is at most this"
        " and its ITL at most `itl_threshold_ms` (srtctl: 2000).",
    )
    itl_threshold_ms: Millis = Field(
        25.0,
        description="Goodput threshold on a request's inter-token latency,"
        " `(latency - TTFT) / (output tokens - 1)` (srtctl: 25).",
    )
    tokenizer: str | None = Field(
        None,
        description="Directory holding the served model's `tokenizer.json`, used to build the"
        " trace's prompts (srtctl passes the model's path). Default: `engine.model`.",
    )
    block_size: Annotated[int, Field(ge=1, le=65536)] = Field(
        512,
        description="Tokens per `hash_ids` entry: the same id gives the same block of tokens,"
        " so requests sharing ids share a prompt prefix (srt; Mooncake's traces use 512).",
    )
    aiperf_package: str | None = Field(
        None,
        description="srtctl's AIPerf version pin: accepted so srtctl recipes load, unused"
        " (srt-benchmarks replays the trace itself; see the README).",
    )
    seed: int = Field(0, description="Seed of the prompt tokens drawn for each block (srt).")
    max_failed_ratio: Ratio = Field(
        0.0,
        description="The benchmark fails when the failed share of any run's requests is above"
        " this (srt).",
    )


class MooncakeRouterOptions(_Trace):
    """srtctl's ``mooncake-router``: a Mooncake trace (arrival times, input lengths, block
    hashes shared between requests, output lengths) replayed at its own timestamps against
    the frontend, to show what KV-aware routing gains on shared prefixes."""

    mooncake_workload: Literal["conversation", "toolagent", "synthetic", "mooncake"] = Field(
        "conversation",
        description="Which of Mooncake's published traces the run stands for (srtctl downloads"
        " `<workload>_trace.jsonl`; here give it as `trace_file`). Recorded in the result.",
    )
    trace_file: str | None = Field(
        None,
        description="A local Mooncake-format trace (JSON Lines; srt: jobs cannot download)."
        " Default: a synthetic trace srt-benchmarks generates from `seed`"
        " (`synthetic_requests` requests of multi-turn conversations sharing prefixes).",
    )
    synthetic_requests: Annotated[int, Field(ge=1, le=100000)] = Field(
        32, description="Requests in the generated trace when `trace_file` is not set (srt)."
    )


class TraceReplayOptions(_Trace):
    """srtctl's ``trace-replay``: a local trace file replayed once per concurrency, each
    request at its timestamp, at most ``concurrency`` in flight."""

    trace_file: str = Field(
        description="The trace to replay: JSON Lines of Mooncake's format (`timestamp` ms,"
        " `input_length`, `output_length`, `hash_ids`, or the prompt itself as `text_input`)."
    )
    concurrencies: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] = Field(
        min_length=1,
        description="Requests in flight at most, one replay each: a list, or `AxB`.",
    )

    _split = field_validator("concurrencies", mode="before")(split_concurrencies)
