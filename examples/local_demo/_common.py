"""Shared helpers of the local demo's programs (stdlib only, any Python 3.8+).

The demo's "model" is deterministic: the tokens of a completion depend only on the prompt,
the vocabulary and the token index, so the benchmark can check every answer exactly.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import signal
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z")
_VOWELS = ("a", "e", "i", "o", "u")
_CODAS = ("", "n", "r", "s")


def setup_output() -> None:
    """Line-buffered stdout/stderr: the log file sees every line at once (log probes)."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)


def say(name: str, message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} [{name}] {message}", flush=True)


def make_vocab(size: int) -> list[str]:
    """``size`` distinct pronounceable words, always the same for the same size."""
    words: list[str] = []
    for a in _ONSETS:
        for v in _VOWELS:
            for b in _ONSETS:
                for w in _VOWELS:
                    for c in _CODAS:
                        words.append(a + v + b + w + c)
                        if len(words) == size:
                            return words
    return words


def load_vocab(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        words = [line.strip() for line in fh if line.strip()]
    if not words:
        raise ValueError(f"{path} holds no words")
    return words


def kv_state(prompt: str) -> str:
    """What prefill computes for a prompt (stands in for the KV cache)."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def token(state: str, index: int, vocab: list[str]) -> str:
    digest = hashlib.sha256(f"{state}:{index}".encode()).digest()
    return vocab[int.from_bytes(digest[:4], "big") % len(vocab)]


def expected_tokens(prompt: str, max_tokens: int, vocab: list[str]) -> list[str]:
    state = kv_state(prompt)
    return [token(state, i, vocab) for i in range(max_tokens)]


# --------------------------------------------------------------------------- HTTP


class Handler(BaseHTTPRequestHandler):
    """JSON helpers; quiet access log (errors still go to the log)."""

    protocol_version = "HTTP/1.1"
    server_version = "srt-demo/1"
    #: Small writes go out at once (no Nagle + delayed-ACK stalls of ~40 ms on loopback);
    #: the buffered writer sends a response in one segment, flushed after each request.
    disable_nagle_algorithm = True
    wbufsize = 64 * 1024

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def send_json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def send_chunk(self, body: Any) -> None:
        data = json.dumps(body).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away is not an error worth a traceback in the log."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


def serve(server: Server, name: str) -> None:
    """Serve until SIGTERM/SIGINT, then close the socket and exit 0."""

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=3600)
    except SystemExit:
        say(name, "stopping")
    finally:
        server.server_close()


def wait_for_signal(name: str) -> None:
    """Idle until SIGTERM/SIGINT, then exit 0."""

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while True:
            signal.pause()
    except SystemExit:
        say(name, "stopping")


def request(method: str, url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    """One HTTP request with a JSON body; returns (status, decoded JSON or text)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port or 80, timeout=timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        path = parts.path + ("?" + parts.query if parts.query else "")
        conn.request(method, path or "/", body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            return resp.status, raw.decode(errors="replace")
    finally:
        conn.close()
