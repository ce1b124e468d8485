"""The demo's benchmark: sends requests to the frontend and checks every answer.

The frontend's address comes from ``SRT_FRONTEND_URL`` (srt gives it to the benchmark).
Each answer must be exactly the tokens the deterministic model yields for the prompt; a
quarter of the requests stream. Prints a summary (requests, tokens, p50/p99 latency) and
exits 0 when every answer was right, 1 otherwise.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse
from typing import Any

from _common import expected_tokens, load_vocab, make_vocab, request, setup_output

NAME = "benchmark"


def prompt_of(i: int, words: list[str]) -> str:
    first, second = words[i % len(words)], words[(7 * i) % len(words)]
    return f"request {i}: tell me about the {first} of {second}"


def complete(url: str, prompt: str, max_tokens: int, stream: bool) -> tuple[int, list[str], Any]:
    """One completion: (HTTP status, tokens, the final JSON object or error text)."""
    if not stream:
        status, body = request(
            "POST", f"{url}/v1/completions", {"prompt": prompt, "max_tokens": max_tokens}
        )
        got = body.get("tokens", []) if isinstance(body, dict) else []
        return status, got, body
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=10.0)
    try:
        payload = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "stream": True})
        headers = {"Content-Type": "application/json"}
        conn.request("POST", "/v1/completions", body=payload, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            return resp.status, [], resp.read().decode(errors="replace")
        tokens: list[str] = []
        final: Any = "stream ended without a done line"
        for raw in iter(resp.readline, b""):
            line = json.loads(raw)
            if "token" in line and not isinstance(final, dict):
                tokens.append(line["token"])
            else:
                final = line
        return resp.status, tokens, final
    finally:
        conn.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def check_answer(
    prompt: str, max_tokens: int, vocab: list[str], status: int, tokens: list[str], final: Any
) -> str | None:
    """What is wrong with one answer, or None when it is exactly what the model yields."""
    want = expected_tokens(prompt, max_tokens, vocab)
    want_usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(want)}
    if status != 200:
        return f"HTTP {status}: {final}"
    if tokens != want:
        return f"wrong tokens: got {tokens[:4]}..., want {want[:4]}..."
    if not isinstance(final, dict) or final.get("usage") != want_usage:
        return f"bad final object: {final}"
    return None


class Tally:
    """The results of every client thread, under one lock; prints progress as it goes."""

    def __init__(self, requests: int) -> None:
        self.lock = threading.Lock()
        self.requests = requests
        self.step = max(1, requests // 4)
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self.tokens_total = 0
        self.done = 0

    def add(self, label: str, problem: str | None, elapsed: float, tokens: int) -> None:
        with self.lock:
            self.done += 1
            if problem:
                self.errors.append(f"{label}: {problem}")
            else:
                self.latencies.append(elapsed)
                self.tokens_total += tokens
            if self.done % self.step == 0 or self.done == self.requests:
                print(
                    f"[{NAME}] progress: {self.done}/{self.requests} ({len(self.errors)} bad)",
                    flush=True,
                )


def run_requests(args: argparse.Namespace, url: str, vocab: list[str], tally: Tally) -> float:
    """Send every request from ``args.concurrency`` threads; returns the wall time."""
    words = make_vocab(64)

    def one(i: int) -> None:
        prompt = prompt_of(i, words)
        stream = i % 4 == 3
        t0 = time.perf_counter()
        try:
            status, tokens, final = complete(url, prompt, args.max_tokens, stream)
        except (OSError, ValueError) as exc:
            status, tokens, final = 0, [], f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - t0
        problem = check_answer(prompt, args.max_tokens, vocab, status, tokens, final)
        tally.add(f"request {i}{' (stream)' if stream else ''}", problem, elapsed, len(tokens))

    indexes = iter(range(args.requests))

    def client() -> None:
        while True:
            with tally.lock:
                i = next(indexes, None)
            if i is None:
                return
            one(i)

    started = time.perf_counter()
    clients = [threading.Thread(target=client) for _ in range(max(1, args.concurrency))]
    for t in clients:
        t.start()
    for t in clients:
        t.join()
    return time.perf_counter() - started


def registry_problem(registry: str, requests: int) -> str | None:
    """Whether the registry counted every request (it is told after each answer, so wait a
    little); None when it did."""
    deadline = time.monotonic() + 3.0
    counted: Any = None
    while time.monotonic() < deadline:
        try:
            _, counted = request("GET", f"{registry}/stats", timeout=2.0)
        except OSError as exc:
            counted = str(exc)
        if isinstance(counted, dict) and counted.get("requests", 0) >= requests:
            return None
        time.sleep(0.05)
    return f"the registry counted {counted}, not {requests} requests"


def summarize(tally: Tally, wall: float) -> None:
    ms = [x * 1000 for x in tally.latencies]
    print(
        f"[{NAME}] summary: requests={tally.requests} ok={len(tally.latencies)}"
        f" bad={len(tally.errors)} tokens={tally.tokens_total}"
        f" p50={percentile(ms, 50):.1f}ms p99={percentile(ms, 99):.1f}ms wall={wall:.2f}s"
        f" throughput={tally.tokens_total / wall if wall else 0:.0f} tokens/s",
        flush=True,
    )
    for line in tally.errors[:10]:
        print(f"[{NAME}] BAD {line}", flush=True)
    if len(tally.errors) > 10:
        print(f"[{NAME}] ... and {len(tally.errors) - 10} more", flush=True)


def main() -> None:
    setup_output()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="Frontend base URL (default: $SRT_FRONTEND_URL).")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--vocab", required=True, help="The vocabulary file the workers use.")
    parser.add_argument("--registry", help="Check that the registry counted the requests.")
    args = parser.parse_args()
    url = (args.url or os.environ.get("SRT_FRONTEND_URL") or "").rstrip("/")
    if not url:
        print("error: no frontend URL: give --url or set SRT_FRONTEND_URL", file=sys.stderr)
        raise SystemExit(2)
    vocab = load_vocab(args.vocab)
    print(f"[{NAME}] {args.requests} requests, {args.concurrency} at a time, to {url}", flush=True)
    tally = Tally(args.requests)
    wall = run_requests(args, url, vocab, tally)
    if args.registry and not tally.errors:
        problem = registry_problem(args.registry, args.requests)
        if problem:
            tally.errors.append(problem)
    summarize(tally, wall)
    if tally.errors:
        raise SystemExit(1)
    print(f"[{NAME}] all {args.requests} answers correct", flush=True)


if __name__ == "__main__":
    main()
