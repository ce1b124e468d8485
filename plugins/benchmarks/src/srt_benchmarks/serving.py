"""sa-bench: srtctl's serving benchmark, one run per concurrency.

Per concurrency ``c``: ``c x num_warmup_mult`` warmup requests (not measured), then
``c x num_prompts_mult`` measured ones, at most ``c`` in flight, started at ``req_rate``
(Poisson arrivals) or all at once (``inf``). Prompts are random token ids of the served
model's tokenizer (srtctl's ``random`` dataset), lengths drawn from
``[random_range_ratio x isl, isl]``; each asks for its drawn output length with
``ignore_eos`` so the server produces exactly that many tokens.

What is measured, per request, from the client's side of a streamed response: TTFT (send
to the first event carrying token text), ITL (gaps between events carrying text), TPOT
((latency - TTFT) / (output tokens - 1)) and the end-to-end latency. Output tokens are the
server's ``usage`` count when it sends one, else the text events seen. A server that
streams no text (Dynamo's mocker: its random ids decode to nothing) leaves ITL empty
(``null`` percentiles, ``token_events: 0``) and TTFT at its first event; TPOT still holds.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from srt_benchmarks.client import RequestFailed, make_client, served_model, stream_events
from srt_benchmarks.options import SaBenchOptions
from srt_benchmarks.stats import summary


@dataclass(slots=True)
class Prompt:
    text: str
    input_tokens: int
    output_tokens: int


@dataclass(slots=True)
class Outcome:
    ok: bool
    error: str = ""
    ttft: float = 0.0
    latency: float = 0.0
    output_tokens: int = 0
    text_events: int = 0
    gaps: list[float] = field(default_factory=list)


def load_tokenizer(directory: str) -> Any:
    """The model's ``tokenizer.json`` (a directory, or the file itself); read locally only."""
    from tokenizers import Tokenizer

    path = Path(directory)
    if path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise SystemExit(
            f"sa-bench: no tokenizer at {path}: set benchmark.options.tokenizer to a local"
            " directory holding the model's tokenizer.json"
        )
    return Tokenizer.from_file(str(path))


def ordinary_ids(tokenizer: Any) -> list[int]:
    """The vocabulary's ids but the special tokens: what a random prompt is drawn from."""
    special = {t.content for t in tokenizer.get_added_tokens_decoder().values() if t.special}
    vocab = sorted(i for tok, i in tokenizer.get_vocab().items() if tok not in special)
    if not vocab:
        raise SystemExit("benchmark: the tokenizer has no ordinary tokens")
    return vocab


def make_prompts(
    tokenizer: Any, options: SaBenchOptions, count: int, rng: random.Random
) -> list[Prompt]:
    """``count`` random prompts; ids from the ordinary vocabulary (no special tokens)."""
    vocab = ordinary_ids(tokenizer)
    low_in = max(1, int(options.isl * options.random_range_ratio))
    low_out = max(1, int(options.osl * options.random_range_ratio))
    out: list[Prompt] = []
    for _ in range(count):
        n_in = rng.randint(low_in, options.isl)
        ids = [rng.choice(vocab) for _ in range(n_in)]
        out.append(Prompt(tokenizer.decode(ids), n_in, rng.randint(low_out, options.osl)))
    return out


def _payload(model: str, prompt: Prompt, chat: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": prompt.output_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
        "temperature": 0.0,
    }
    if chat:
        body["messages"] = [{"role": "user", "content": prompt.text}]
    else:
        body["prompt"] = prompt.text
    return body


def _carries_text(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
    return bool(text)


async def one_request(
    client: httpx.AsyncClient, url: str, model: str, prompt: Prompt, chat: bool
) -> Outcome:
    start = time.perf_counter()
    first: float | None = None
    texts: list[float] = []
    usage: int | None = None
    finished = False
    try:
        async for event in stream_events(client, url, _payload(model, prompt, chat)):
            now = time.perf_counter()
            if event.get("usage"):
                usage = event["usage"].get("completion_tokens")
            for choice in event.get("choices") or ():
                first = now if first is None else first
                if _carries_text(choice):
                    texts.append(now)
                if choice.get("finish_reason"):
                    finished = True
    except (RequestFailed, httpx.HTTPError, ValueError) as exc:
        return Outcome(False, f"{type(exc).__name__}: {exc}"[:300])
    end = time.perf_counter()
    if first is None or not finished:
        return Outcome(False, "the stream carried no finished choice")
    tokens = usage if isinstance(usage, int) and usage > 0 else len(texts)
    # TTFT: the first token's text; a server that streams no text (Dynamo's mocker, whose
    # ids decode to nothing) has only its first event to show
    ttft = (texts[0] if texts else first) - start
    gaps = [b - a for a, b in itertools.pairwise(texts)]
    return Outcome(
        True,
        ttft=ttft,
        latency=end - start,
        output_tokens=tokens,
        text_events=len(texts),
        gaps=gaps,
    )


def poisson_starts(count: int, rate: float, rng: random.Random) -> list[float]:
    """Start offsets (s) of ``count`` requests arriving at ``rate`` per second (all at 0
    for ``inf``)."""
    if rate == float("inf"):
        return [0.0] * count
    starts, now = [], 0.0
    for _ in range(count):
        starts.append(now)
        now += rng.expovariate(rate)
    return starts


async def batch(
    client: httpx.AsyncClient,
    url: str,
    model: str,
    prompts: list[Prompt],
    concurrency: int,
    starts: list[float],
    chat: bool,
) -> tuple[list[Outcome], float]:
    """Each prompt sent at its start offset (s from now, ascending), at most
    ``concurrency`` in flight: a request due while all slots are busy waits for one."""
    gate = asyncio.Semaphore(concurrency)

    async def bounded(prompt: Prompt) -> Outcome:
        async with gate:
            return await one_request(client, url, model, prompt, chat)

    start = time.perf_counter()
    tasks: list[asyncio.Task[Outcome]] = []
    for prompt, due in zip(prompts, starts, strict=True):
        wait = due - (time.perf_counter() - start)
        if wait > 0:
            await asyncio.sleep(wait)
        tasks.append(asyncio.create_task(bounded(prompt)))
    outcomes = list(await asyncio.gather(*tasks))
    return outcomes, time.perf_counter() - start


def report(
    concurrency: int | None, prompts: list[Prompt], outcomes: list[Outcome], duration: float
) -> dict[str, Any]:
    good = [(p, o) for p, o in zip(prompts, outcomes, strict=True) if o.ok]
    failed = [o for o in outcomes if not o.ok]
    out_tokens = sum(o.output_tokens for _, o in good)
    in_tokens = sum(p.input_tokens for p, _ in good)
    tpot = [(o.latency - o.ttft) / (o.output_tokens - 1) for _, o in good if o.output_tokens > 1]
    return {
        "concurrency": concurrency,
        "requests": len(outcomes),
        "completed": len(good),
        "failed": len(failed),
        "failed_ratio": len(failed) / len(outcomes) if outcomes else 0.0,
        "errors": sorted({o.error for o in failed})[:5],
        "duration_s": duration,
        "input_tokens": in_tokens,
        "output_tokens": out_tokens,
        "request_throughput": len(good) / duration if duration > 0 else None,
        "output_throughput": out_tokens / duration if duration > 0 else None,
        "total_token_throughput": (in_tokens + out_tokens) / duration if duration > 0 else None,
        # events that carried token text: ITL is measured between them (none: no ITL)
        "token_events": sum(o.text_events for _, o in good),
        "ttft_ms": summary([o.ttft for _, o in good]),
        "itl_ms": summary([g for _, o in good for g in o.gaps]),
        "tpot_ms": summary(tpot),
        "e2e_latency_ms": summary([o.latency for _, o in good]),
    }


def judge(label: str, run_report: dict[str, Any], max_failed_ratio: float, log: Any) -> bool:
    """Whether a run stayed under ``max_failed_ratio``, logged in one line."""
    ok = bool(run_report["failed_ratio"] <= max_failed_ratio)
    log(
        f"{label}: {run_report['completed']}/{run_report['requests']} ok,"
        f" {run_report['request_throughput'] or 0:.2f} req/s,"
        f" {run_report['output_throughput'] or 0:.1f} output tok/s,"
        f" TTFT p50 {run_report['ttft_ms']['p50'] or 0:.1f} ms"
        + ("" if ok else f" FAILED: {run_report['failed_ratio']:.1%} of requests failed")
    )
    return ok


async def run(base: str, options: SaBenchOptions, log: Any) -> tuple[dict[str, Any], bool]:
    """Every concurrency in order; the summary and whether every run stayed under
    ``max_failed_ratio``."""
    rng = random.Random(options.seed)
    tokenizer = load_tokenizer(str(options.tokenizer))
    chat = options.use_chat_template
    url = f"{base}/v1/chat/completions" if chat else f"{base}/v1/completions"
    runs: list[dict[str, Any]] = []
    passed = True
    top = max(options.concurrencies)
    async with make_client(top, options.request_timeout_seconds) as client:
        model = options.model or await served_model(client, base)
        for c in options.concurrencies:
            warm = make_prompts(tokenizer, options, c * options.num_warmup_mult, rng)
            if warm:
                await batch(client, url, model, warm, c, [0.0] * len(warm), chat)
            prompts = make_prompts(tokenizer, options, c * options.num_prompts_mult, rng)
            starts = poisson_starts(len(prompts), options.rate, rng)
            outcomes, duration = await batch(client, url, model, prompts, c, starts, chat)
            run_report = report(c, prompts, outcomes, duration)
            runs.append(run_report)
            passed = (
                judge(f"sa-bench concurrency={c}", run_report, options.max_failed_ratio, log)
                and passed
            )
    result = {
        "type": "sa-bench",
        "model": model,
        "endpoint": url.removeprefix(base),
        "isl": options.isl,
        "osl": options.osl,
        "req_rate": options.req_rate,
        "max_failed_ratio": options.max_failed_ratio,
        "passed": passed,
        "runs": runs,
    }
    return result, passed
