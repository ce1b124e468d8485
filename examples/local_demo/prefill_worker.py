"""The demo's prefill worker: turns a prompt into a KV handle and the first token.

    POST /prefill  {"prompt": str, "max_tokens": int}
                   -> {"kv_handle": str, "first_token": str, "prompt_tokens": int, "worker": str}
    GET  /kv/<h>   the KV state behind a handle, once (the decode worker pulls it: KV transfer)
    GET  /health   200 once registered with the registry, 503 before

It binds its node's address (``{node_ip}``) and its worker port (``{worker_port}``), and
registers ``http://<node_ip>:<port>`` under ``workers/prefill/<index>`` in the registry.
"""

from __future__ import annotations

import argparse
import itertools
import os
import threading
import time
from collections import OrderedDict

from _common import (
    Handler,
    Server,
    kv_state,
    load_vocab,
    request,
    say,
    serve,
    setup_output,
    token,
)

ROLE = "prefill"
MAX_HANDLES = 100_000


class PrefillHandler(Handler):
    server: PrefillServer

    def do_GET(self) -> None:
        srv = self.server
        if self.path == "/health":
            if srv.registered.is_set():
                self.send_json(200, {"ok": True, "worker": srv.name})
            else:
                self.send_json(503, {"ok": False, "detail": "not registered yet"})
        elif self.path.startswith("/kv/"):
            handle = self.path[len("/kv/") :]
            with srv.lock:
                state = srv.handles.pop(handle, None)
            if state is None:
                self.send_json(404, {"error": f"unknown or already transferred handle {handle}"})
            else:
                self.send_json(200, {"state": state})
        else:
            self.send_json(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        srv = self.server
        if self.path != "/prefill":
            self.send_json(404, {"error": f"no route {self.path}"})
            return
        body = self.read_json()
        prompt = body.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            self.send_json(400, {"error": "prompt must be a non-empty string"})
            return
        state = kv_state(prompt)
        handle = f"{srv.name}-{next(srv.counter)}"
        with srv.lock:
            srv.handles[handle] = state
            while len(srv.handles) > MAX_HANDLES:
                srv.handles.popitem(last=False)
        self.send_json(
            200,
            {
                "kv_handle": handle,
                "first_token": token(state, 0, srv.vocab),
                "prompt_tokens": len(prompt.split()),
                "worker": srv.name,
            },
        )


class PrefillServer(Server):
    def __init__(self, address: tuple[str, int], name: str, vocab: list[str]) -> None:
        super().__init__(address, PrefillHandler)
        self.name = name
        self.vocab = vocab
        self.lock = threading.Lock()
        self.handles: OrderedDict[str, str] = OrderedDict()
        self.counter = itertools.count()
        self.registered = threading.Event()


def register(registry: str, role: str, index: str, url: str, name: str) -> None:
    """Announce ``url`` in the registry, retrying for a few seconds."""
    key = f"workers/{role}/{index}"
    value = {"url": url, "step": name, "node": os.environ.get("SRT_NODE", "?")}
    deadline = time.monotonic() + 10.0
    while True:
        try:
            status, _ = request("PUT", f"{registry}/kv/{key}", value, timeout=2.0)
            if status == 200:
                say(name, f"registered as {key} at {url}")
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise SystemExit(f"cannot register with {registry}: {exc}") from None
        time.sleep(0.05)


def worker_args(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", required=True, help="Address to bind ({node_ip}).")
    parser.add_argument("--port", type=int, required=True, help="Port ({worker_port}).")
    parser.add_argument("--index", default="0", help="Worker index ({worker_index}).")
    parser.add_argument("--registry", required=True, help="Registry base URL.")
    parser.add_argument("--vocab", required=True, help="Vocabulary file.")
    return parser.parse_args()


def main() -> None:
    setup_output()
    args = worker_args(__doc__.splitlines()[0])
    name = os.environ.get("SRT_INSTANCE") or f"{ROLE}_{args.index}"
    vocab = load_vocab(args.vocab)
    server = PrefillServer((args.host, args.port), name, vocab)
    url = f"http://{args.host}:{args.port}"
    say(name, f"listening on {url} ({len(vocab)}-word vocabulary)")

    def announce() -> None:
        register(args.registry, ROLE, args.index, url, name)
        server.registered.set()

    threading.Thread(target=announce, daemon=True).start()
    serve(server, name)


if __name__ == "__main__":
    main()
