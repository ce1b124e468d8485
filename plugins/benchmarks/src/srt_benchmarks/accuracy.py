"""gsm8k and gpqa: ask every question of a local dataset, grade the answers, report accuracy.

srtctl runs SGLang's ``run_eval`` (simple-evals) for these; neither it nor the datasets can
be fetched inside a job here, so the suites read a local JSON Lines file
(``dataset_path``) and default to a small sample shipped in this package, written for srt.
Prompts and grading follow simple-evals: gsm8k with ``num_shots`` worked examples and the
last number of the reply as the answer; gpqa with the four choices shuffled per question
(seeded) and the letter after ``Answer:`` as the answer.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from srt_benchmarks.client import make_client, served_model
from srt_benchmarks.options import GpqaOptions, Gsm8kOptions
from srt_benchmarks.stats import summary

NUMBER = re.compile(r"-?[\d,]*\.?\d+")
LETTER = re.compile(r"(?i)answer\s*:\s*\(?([A-D])\b")
GPQA_TEMPLATE = (
    "Answer the following multiple choice question. The last line of your response should"
    " be of the following format: 'Answer: $LETTER' (without quotes) where LETTER is one of"
    " ABCD. Think step by step before answering.\n\n{question}\n\n"
    "A) {A}\nB) {B}\nC) {C}\nD) {D}"
)


@dataclass(frozen=True, slots=True)
class Question:
    prompt: str
    expected: str


def read_items(path: str | None, suite: str) -> tuple[list[dict[str, Any]], str]:
    """The dataset's items and where they came from (a path, or the built-in sample)."""
    if path is None:
        text = resources.files("srt_benchmarks").joinpath(f"data/{suite}-sample.jsonl").read_text()
        where = f"built-in {suite} sample"
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise SystemExit(f"{suite}: cannot read dataset_path {path}: {exc.strerror}") from None
        where = path
    items = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise SystemExit(f"{suite}: {where} line {number}: not JSON ({exc})") from None
            if not isinstance(item, dict):
                raise SystemExit(f"{suite}: {where} line {number}: not a JSON object")
            items.append(item)
    if not items:
        raise SystemExit(f"{suite}: {where} holds no items")
    return items, where


def _field(item: dict[str, Any], key: str, suite: str, index: int) -> Any:
    if key not in item:
        raise SystemExit(f"{suite}: item {index + 1} has no {key!r}")
    return item[key]


def gsm8k_answer(solution: str) -> str:
    """The number after gsm8k's ``####`` marker (or the solution's last number)."""
    tail = solution.rsplit("####", 1)[-1]
    return normalize_number(tail) or normalize_number(solution)


def normalize_number(text: str) -> str:
    """The last number in ``text`` without thousands separators or a trailing ``.0``."""
    found: list[str] = NUMBER.findall(text)
    if not found:
        return ""
    value = found[-1].replace(",", "")
    if "." in value:
        value = value.rstrip("0").rstrip(".")
    return value


def gsm8k_questions(items: list[dict[str, Any]], options: Gsm8kOptions) -> list[Question]:
    pairs = [
        (str(_field(it, "question", "gsm8k", i)), str(_field(it, "answer", "gsm8k", i)))
        for i, it in enumerate(items)
    ]
    count = min(options.num_examples or len(pairs), len(pairs))
    out = []
    for i in range(count):
        shots = [p for j, p in enumerate(pairs) if j != i][: options.num_shots]
        head = "".join(f"Question: {q}\nAnswer: {a}\n\n" for q, a in shots)
        out.append(Question(f"{head}Question: {pairs[i][0]}\nAnswer:", gsm8k_answer(pairs[i][1])))
    return out


def gpqa_questions(items: list[dict[str, Any]], options: GpqaOptions) -> list[Question]:
    count = min(options.num_examples or len(items), len(items))
    out = []
    for i, item in enumerate(items[:count]):
        correct = str(_field(item, "correct_answer", "gpqa", i))
        wrong = [str(w) for w in _field(item, "incorrect_answers", "gpqa", i)]
        if len(wrong) != 3:
            raise SystemExit(f"gpqa: item {i + 1} needs exactly 3 incorrect_answers")
        choices = [correct, *wrong]
        random.Random(i).shuffle(choices)
        letters = dict(zip("ABCD", choices, strict=True))
        prompt = GPQA_TEMPLATE.format(question=_field(item, "question", "gpqa", i), **letters)
        out.append(Question(prompt, "ABCD"[choices.index(correct)]))
    return out


def grade(suite: str, reply: str) -> str:
    """The answer a reply gives: gsm8k's last number, gpqa's letter; ``""`` for none."""
    if suite == "gsm8k":
        return normalize_number(reply)
    found: list[str] = LETTER.findall(reply)
    return found[-1].upper() if found else ""


async def _ask(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], prompt: str
) -> tuple[str | None, float, str]:
    """The reply's text (``None``: the request failed), its latency and the error."""
    start = time.perf_counter()
    try:
        response = await client.post(
            url, json={**body, "messages": [{"role": "user", "content": prompt}]}
        )
        latency = time.perf_counter() - start
        if response.status_code != 200:
            return None, latency, f"HTTP {response.status_code}"
        choice = response.json()["choices"][0]
        # the content may be null: Dynamo's mocker returns ids outside the vocabulary
        return str(choice["message"].get("content") or ""), latency, ""
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        return None, time.perf_counter() - start, type(exc).__name__


async def run(
    suite: str, base: str, options: Gsm8kOptions | GpqaOptions, log: Any
) -> tuple[dict[str, Any], bool]:
    items, where = read_items(options.dataset_path, suite)
    questions = (
        gsm8k_questions(items, options)
        if isinstance(options, Gsm8kOptions)
        else gpqa_questions(items, options)
    )
    asked = [q for q in questions for _ in range(options.repeat)]
    gate = asyncio.Semaphore(options.num_threads)
    url = f"{base}/v1/chat/completions"
    async with make_client(options.num_threads, options.request_timeout_seconds) as client:
        model = options.model or await served_model(client, base)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": options.max_tokens,
            "temperature": options.temperature,
        }
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.top_k is not None:
            body["top_k"] = options.top_k

        async def one(q: Question) -> tuple[str | None, float, str]:
            async with gate:
                return await _ask(client, url, body, q.prompt)

        start = time.perf_counter()
        replies = await asyncio.gather(*(one(q) for q in asked))
        duration = time.perf_counter() - start
    answered = [(q, r) for q, (r, _, _) in zip(asked, replies, strict=True) if r is not None]
    failed = len(asked) - len(answered)
    correct = sum(1 for q, r in answered if grade(suite, r) == q.expected)
    unparsed = sum(1 for _, r in answered if not grade(suite, r))
    accuracy = correct / len(asked) if asked else 0.0
    failed_ratio = failed / len(asked) if asked else 0.0
    passed = failed_ratio <= options.max_failed_ratio and accuracy >= options.min_accuracy
    result = {
        "type": suite,
        "model": model,
        "dataset": where,
        "questions": len(questions),
        "repeat": options.repeat,
        "requests": len(asked),
        "answered": len(answered),
        "failed": failed,
        "failed_ratio": failed_ratio,
        "errors": sorted({e for r, _, e in replies if r is None})[:5],
        "correct": correct,
        "unparsed": unparsed,
        "accuracy": accuracy,
        "min_accuracy": options.min_accuracy,
        "max_failed_ratio": options.max_failed_ratio,
        "duration_s": duration,
        "latency_ms": summary([lat for _, lat, _ in replies]),
        "passed": passed,
    }
    log(
        f"{suite}: {correct}/{len(asked)} correct (accuracy {accuracy:.3f}), {failed} failed,"
        f" {unparsed} without an answer, dataset: {where}"
    )
    return result, passed
