"""mooncake-router and trace-replay: a Mooncake-format trace replayed with its own timing.

A trace is JSON Lines, one request a line, in the format of Mooncake's published traces
(which AIPerf's ``mooncake_trace`` dataset reads too): ``timestamp`` (ms since the trace's
start), ``input_length`` and ``output_length`` (tokens), and ``hash_ids``, one id per
``block_size`` tokens of the prompt, where equal ids mean equal blocks. The ids are what
makes a trace worth replaying against a KV-aware router: requests that share a leading run
of ids share a prompt prefix, so the router can send them where that prefix is cached. A
line may carry the prompt itself as ``text_input`` instead.

Prompts are rebuilt here with the same property: the block for an id is drawn from the
tokenizer's ordinary ids by a generator seeded with ``(seed, id)``, so every request
naming it gets the same tokens; a prompt longer than its blocks is finished with tokens of
its own. Each request is sent at its timestamp (a request due while ``concurrency``
requests are in flight waits for one), streamed, and measured by sa-bench's code.

srtctl downloads the FAST25 traces inside the job; a job here cannot, so ``mooncake-router``
reads ``trace_file`` or, without it, a synthetic trace generated from ``seed``: multi-turn
conversations under one shared system prompt, each turn's ids extending the previous turn's.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from srt_benchmarks.client import make_client, served_model
from srt_benchmarks.options import (
    MAX_CONCURRENCY,
    MooncakeRouterOptions,
    TraceReplayOptions,
)
from srt_benchmarks.serving import (
    Outcome,
    Prompt,
    batch,
    judge,
    load_tokenizer,
    ordinary_ids,
    report,
)

Count = Annotated[int, Field(ge=1)]


class Record(BaseModel):
    """One line of a trace. Other keys (a session id, say) are ignored, as AIPerf does."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    timestamp: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0
    input_length: Count | None = None
    output_length: Count
    hash_ids: list[Annotated[int, Field(ge=0)]] = []
    text_input: str | None = None

    @model_validator(mode="after")
    def _prompt(self) -> Record:
        if self.input_length is None and self.text_input is None:
            raise ValueError("needs input_length (with hash_ids) or text_input")
        return self


def read_trace(path: str, kind: str) -> list[Record]:
    """The trace's records in timestamp order; a bad line stops the run naming its number."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"{kind}: cannot read trace_file {path}: {exc.strerror}") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append(Record.model_validate(json.loads(line)))
        except (ValueError, ValidationError) as exc:
            first = str(exc).splitlines()
            why = "; ".join(first[1:3]) if isinstance(exc, ValidationError) else first[0]
            raise SystemExit(f"{kind}: {path}:{number}: {why.strip()}") from None
    if not records:
        raise SystemExit(f"{kind}: {path} holds no request")
    return sorted(records, key=lambda r: r.timestamp)


def synthetic_trace(count: int, block_size: int, seed: int) -> list[Record]:
    """``count`` requests of multi-turn conversations, generated (not sampled from data).

    Every prompt opens with the same two system blocks (ids 0 and 1); a conversation's turn
    repeats all of its previous turn's ids and adds one or two of its own, so turns share
    growing prefixes, as in Mooncake's conversation trace. At most 6 blocks a prompt keeps
    it inside a small model's context. Conversations start about 4 a second (Poisson),
    turns follow 0.2-1 s apart, outputs are 8-64 tokens.
    """
    rng = random.Random(f"srt-benchmarks synthetic trace {seed}")
    records: list[Record] = []
    next_id, start = 2, 0.0
    while len(records) < count:
        ids, at = [0, 1], start
        for _ in range(rng.randint(1, 4)):
            if len(records) == count or len(ids) >= 6:
                break
            fresh = rng.randint(1, min(2, 6 - len(ids)))
            ids = [*ids, *range(next_id, next_id + fresh)]
            next_id += fresh
            length = len(ids) * block_size - rng.randrange(block_size)
            records.append(
                Record(
                    timestamp=round(at * 1000, 3),
                    input_length=length,
                    output_length=rng.randint(8, 64),
                    hash_ids=ids,
                )
            )
            at += rng.uniform(0.2, 1.0)
        start += rng.expovariate(4.0)
    return sorted(records, key=lambda r: r.timestamp)


def build_prompts(
    records: list[Record], tokenizer: Any, block_size: int, seed: int
) -> list[Prompt]:
    """The prompt of each record: its blocks' tokens (the same for the same id), cut or
    finished to ``input_length``; ``text_input`` is sent as it is."""
    vocab = ordinary_ids(tokenizer)
    blocks: dict[int, list[int]] = {}

    def block(hash_id: int) -> list[int]:
        if hash_id not in blocks:
            rng = random.Random(f"{seed}:block:{hash_id}")
            blocks[hash_id] = [rng.choice(vocab) for _ in range(block_size)]
        return blocks[hash_id]

    prompts = []
    for index, record in enumerate(records):
        if record.text_input is not None:
            length = record.input_length or len(tokenizer.encode(record.text_input).ids)
            prompts.append(Prompt(record.text_input, length, record.output_length))
            continue
        assert record.input_length is not None
        ids = [t for h in record.hash_ids for t in block(h)][: record.input_length]
        own = random.Random(f"{seed}:request:{index}")
        ids += [own.choice(vocab) for _ in range(record.input_length - len(ids))]
        prompts.append(Prompt(tokenizer.decode(ids), record.input_length, record.output_length))
    return prompts


def goodput(
    outcomes: list[Outcome], duration: float, ttft_ms: float, itl_ms: float
) -> dict[str, Any]:
    """Requests within both thresholds, as AIPerf's goodput counts them: TTFT, and the
    request's ITL ``(latency - TTFT) / (output tokens - 1)``."""
    good = 0
    for o in outcomes:
        if not o.ok or o.ttft * 1000 > ttft_ms:
            continue
        itl = (o.latency - o.ttft) / (o.output_tokens - 1) if o.output_tokens > 1 else 0.0
        good += itl * 1000 <= itl_ms
    return {
        "good_requests": good,
        "goodput": good / duration if duration > 0 else None,
        "ttft_threshold_ms": ttft_ms,
        "itl_threshold_ms": itl_ms,
    }


async def run(
    kind: str, base: str, options: MooncakeRouterOptions | TraceReplayOptions, log: Any
) -> tuple[dict[str, Any], bool]:
    """One replay (mooncake-router: no concurrency bound) or one per concurrency
    (trace-replay); the summary and whether every replay stayed under
    ``max_failed_ratio``."""
    if options.trace_file is not None:
        records, source = read_trace(options.trace_file, kind), options.trace_file
    else:
        assert isinstance(options, MooncakeRouterOptions)
        records = synthetic_trace(options.synthetic_requests, options.block_size, options.seed)
        source = f"synthetic ({options.synthetic_requests} requests, seed {options.seed})"
    tokenizer = load_tokenizer(str(options.tokenizer))
    prompts = build_prompts(records, tokenizer, options.block_size, options.seed)
    starts = [(r.timestamp - records[0].timestamp) / 1000 for r in records]
    bounds: list[int | None] = (
        list(options.concurrencies) if isinstance(options, TraceReplayOptions) else [None]
    )
    url = f"{base}/v1/chat/completions"
    runs: list[dict[str, Any]] = []
    passed = True
    top = min(max(c or len(prompts) for c in bounds), MAX_CONCURRENCY)
    async with make_client(top, options.request_timeout_seconds) as client:
        model = options.model or await served_model(client, base)
        for c in bounds:
            outcomes, duration = await batch(
                client, url, model, prompts, c or len(prompts), starts, True
            )
            run_report = report(c, prompts, outcomes, duration)
            run_report.update(
                goodput(outcomes, duration, options.ttft_threshold_ms, options.itl_threshold_ms)
            )
            runs.append(run_report)
            label = kind if c is None else f"{kind} concurrency={c}"
            passed = judge(label, run_report, options.max_failed_ratio, log) and passed
    result: dict[str, Any] = {
        "type": kind,
        "model": model,
        "endpoint": "/v1/chat/completions",
        "trace": source,
        "trace_requests": len(records),
        "trace_span_s": starts[-1],
        "max_failed_ratio": options.max_failed_ratio,
        "passed": passed,
        "runs": runs,
    }
    if isinstance(options, MooncakeRouterOptions):
        result["mooncake_workload"] = options.mooncake_workload
    return result, passed
