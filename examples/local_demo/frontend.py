"""The demo's frontend: finds the workers in the registry and serves completions.

    POST /v1/completions  {"prompt": str, "max_tokens": int = 16, "stream": bool = false}
        calls a prefill worker (KV handle + first token), then a decode worker (the other
        tokens, streamed), and answers
        {"text", "tokens", "usage": {"prompt_tokens", "completion_tokens"}, "prefill", "decode"}
        or, with "stream": true, NDJSON lines {"token": str} then {"done": true, ...}.
    GET  /health          200 once a prefill and a decode worker are known, 503 before
    GET  /stats           requests served, tokens, failures

Every request served is reported to the registry's /stats (after the answer was sent).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import threading
import time
import urllib.parse
from typing import Any

from _common import Handler, Server, request, say, serve, setup_output

NAME = "frontend"
ROLES = ("prefill", "decode")


class WorkerError(Exception):
    pass


class FrontendHandler(Handler):
    server: FrontendServer
    #: Whether the current answer is a stream whose headers are sent (errors go in it then).
    streaming = False

    def do_GET(self) -> None:
        srv = self.server
        if self.path == "/health":
            missing = [r for r in ROLES if not srv.workers.get(r)]
            if missing:
                self.send_json(503, {"ok": False, "missing": missing})
            else:
                self.send_json(200, {"ok": True, "workers": srv.workers})
        elif self.path == "/stats":
            with srv.lock:
                self.send_json(200, dict(srv.stats))
        else:
            self.send_json(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        if self.path != "/v1/completions":
            self.send_json(404, {"error": f"no route {self.path}"})
            return
        try:
            prompt, max_tokens, stream = completion_args(self.read_json())
        except BadRequest as exc:
            self.send_json(400, {"error": str(exc)})
            return
        self.streaming = False
        try:
            pre, tokens, done = self.generate(prompt, max_tokens, stream)
        except (OSError, WorkerError, ValueError, KeyError) as exc:
            self.fail(exc)
            return
        usage = {"prompt_tokens": pre["prompt_tokens"], "completion_tokens": len(tokens)}
        if stream:
            self.send_chunk({"done": True, "usage": usage, "decode": done.get("worker")})
            self.end_stream()
        else:
            self.send_json(
                200,
                {
                    "text": " ".join(tokens),
                    "tokens": tokens,
                    "usage": usage,
                    "prefill": pre["worker"],
                    "decode": done.get("worker"),
                },
            )
        self.server.count(requests=1, tokens=len(tokens))
        self.server.report({"requests": 1, "tokens": len(tokens)})

    def generate(
        self, prompt: str, max_tokens: int, stream: bool
    ) -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        """Prefill on one worker, decode on another: (prefill answer, tokens, done line).

        With ``stream``, each token is sent as it comes (``self.streaming`` tells that the
        headers are gone).
        """
        srv = self.server
        prefill_url = srv.pick("prefill")
        decode_url = srv.pick("decode")
        status, pre = request(
            "POST", f"{prefill_url}/prefill", {"prompt": prompt, "max_tokens": max_tokens}
        )
        if status != 200 or not isinstance(pre, dict):
            raise WorkerError(f"prefill {prefill_url}: HTTP {status} {pre}")
        if stream:
            self.start_stream()
            self.streaming = True
            self.send_chunk({"token": pre["first_token"]})
        tokens = [pre["first_token"]]
        done: dict[str, Any] = {}
        for line in decode_stream(decode_url, pre["kv_handle"], prefill_url, max_tokens):
            if line.get("done"):
                done = line
            elif not done:
                tokens.append(line["token"])
                if stream:
                    self.send_chunk({"token": line["token"]})
        if not done:
            raise WorkerError(f"decode {decode_url}: the stream ended early")
        return pre, tokens, done

    def fail(self, exc: Exception) -> None:
        self.server.count(failures=1)
        if self.streaming:
            # headers are gone already: end the stream with the error
            self.send_chunk({"error": f"{type(exc).__name__}: {exc}"})
            self.end_stream()
            return
        self.send_json(502, {"error": f"{type(exc).__name__}: {exc}"})


class BadRequest(Exception):
    pass


def completion_args(body: Any) -> tuple[str, int, bool]:
    """(prompt, max_tokens, stream) of a completion request; BadRequest says what is wrong."""
    prompt = body.get("prompt")
    max_tokens = body.get("max_tokens", 16)
    if not isinstance(prompt, str) or not prompt:
        raise BadRequest("prompt must be a non-empty string")
    if not isinstance(max_tokens, int) or not 1 <= max_tokens <= 4096:
        raise BadRequest("max_tokens must be an integer in 1..4096")
    return prompt, max_tokens, bool(body.get("stream"))


def decode_stream(decode_url: str, handle: str, prefill_url: str, max_tokens: int) -> Any:
    parts = urllib.parse.urlsplit(decode_url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=10.0)
    try:
        payload = {"kv_handle": handle, "prefill_url": prefill_url, "max_tokens": max_tokens}
        body = json.dumps(payload)
        conn.request("POST", "/decode", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            raise WorkerError(f"decode {decode_url}: HTTP {resp.status} {resp.read()[:200]!r}")
        while True:
            line = resp.readline()
            if not line:
                return
            yield json.loads(line)
    finally:
        conn.close()


class FrontendServer(Server):
    def __init__(self, address: tuple[str, int], registry: str) -> None:
        super().__init__(address, FrontendHandler)
        self.registry = registry
        self.lock = threading.Lock()
        self.workers: dict[str, list[str]] = {}
        self.stats: dict[str, int] = {"requests": 0, "tokens": 0, "failures": 0}
        self._turn = itertools.count()

    def pick(self, role: str) -> str:
        urls = self.workers.get(role)
        if not urls:
            raise WorkerError(f"no {role} worker registered")
        return urls[next(self._turn) % len(urls)]

    def count(self, **deltas: int) -> None:
        with self.lock:
            for key, value in deltas.items():
                self.stats[key] += value

    def report(self, deltas: dict[str, int]) -> None:
        try:
            request("POST", f"{self.registry}/stats", deltas, timeout=2.0)
        except OSError as exc:
            say(NAME, f"could not report to the registry: {exc}")

    def discover(self) -> None:
        """Follow ``workers/<role>/<index>`` in the registry (fast until every role is known)."""
        known: dict[str, list[str]] = {}
        while True:
            try:
                status, found = request("GET", f"{self.registry}/kv?prefix=workers/", timeout=2.0)
            except OSError:
                status, found = 0, None
            if status == 200 and isinstance(found, dict):
                workers: dict[str, list[str]] = {}
                for key in sorted(found):
                    _, role, _ = key.split("/", 2)
                    workers.setdefault(role, []).append(found[key]["url"])
                if workers != known:
                    say(NAME, f"workers: {workers}")
                    known = workers
                    self.workers = workers
            complete = all(self.workers.get(r) for r in ROLES)
            time.sleep(1.0 if complete else 0.02)


def main() -> None:
    setup_output()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--registry", required=True, help="Registry base URL.")
    args = parser.parse_args()
    server = FrontendServer((args.host, args.port), args.registry)
    say(NAME, f"listening on http://{args.host}:{args.port}, registry {args.registry}")
    threading.Thread(target=server.discover, daemon=True).start()
    serve(server, NAME)


if __name__ == "__main__":
    main()
