"""The demo's decode worker: pulls a KV state from a prefill worker and streams tokens.

    POST /decode  {"kv_handle": str, "prefill_url": str, "max_tokens": int}
                  -> chunked NDJSON: {"index": i, "token": str} for i = 1 .. max_tokens-1,
                     then {"done": true, "worker": str}
    GET  /health  200 once registered with the registry, 503 before

Token 0 came from prefill; decode continues from the transferred KV state.
"""

from __future__ import annotations

import os
import threading

from _common import Handler, Server, load_vocab, request, say, serve, setup_output, token
from prefill_worker import register, worker_args

ROLE = "decode"


class DecodeHandler(Handler):
    server: DecodeServer

    def do_GET(self) -> None:
        srv = self.server
        if self.path == "/health":
            if srv.registered.is_set():
                self.send_json(200, {"ok": True, "worker": srv.name})
            else:
                self.send_json(503, {"ok": False, "detail": "not registered yet"})
        else:
            self.send_json(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        srv = self.server
        if self.path != "/decode":
            self.send_json(404, {"error": f"no route {self.path}"})
            return
        body = self.read_json()
        handle, prefill_url = body.get("kv_handle"), body.get("prefill_url")
        max_tokens = body.get("max_tokens", 16)
        if not isinstance(handle, str) or not isinstance(prefill_url, str):
            self.send_json(400, {"error": "kv_handle and prefill_url are required"})
            return
        try:
            status, kv = request("GET", f"{prefill_url}/kv/{handle}", timeout=5.0)
        except OSError as exc:
            self.send_json(502, {"error": f"KV transfer from {prefill_url} failed: {exc}"})
            return
        if status != 200 or not isinstance(kv, dict):
            self.send_json(502, {"error": f"KV transfer from {prefill_url}: HTTP {status} {kv}"})
            return
        state = kv["state"]
        self.start_stream()
        for i in range(1, int(max_tokens)):
            self.send_chunk({"index": i, "token": token(state, i, srv.vocab)})
        self.send_chunk({"done": True, "worker": srv.name})
        self.end_stream()


class DecodeServer(Server):
    def __init__(self, address: tuple[str, int], name: str, vocab: list[str]) -> None:
        super().__init__(address, DecodeHandler)
        self.name = name
        self.vocab = vocab
        self.registered = threading.Event()


def main() -> None:
    setup_output()
    args = worker_args(__doc__.splitlines()[0])
    name = os.environ.get("SRT_INSTANCE") or f"{ROLE}_{args.index}"
    vocab = load_vocab(args.vocab)
    server = DecodeServer((args.host, args.port), name, vocab)
    url = f"http://{args.host}:{args.port}"
    say(name, f"listening on {url} ({len(vocab)}-word vocabulary)")

    def announce() -> None:
        register(args.registry, ROLE, args.index, url, name)
        server.registered.set()

    threading.Thread(target=announce, daemon=True).start()
    serve(server, name)


if __name__ == "__main__":
    main()
