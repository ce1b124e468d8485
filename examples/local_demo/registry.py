"""The demo's generic sidecar: a tiny key/value and stats HTTP server.

Workers register their addresses under ``workers/<role>/<index>``; the frontend finds them
there and reports every request it served to ``/stats``. (In a real job this is the role of
etcd and of a metrics exporter.)

    GET  /health            200 once listening
    PUT  /kv/<key>          store the JSON body
    GET  /kv/<key>          the stored value (404 if unknown)
    GET  /kv?prefix=<p>     every key starting with p, as an object
    POST /stats             add the body's numbers to the counters
    GET  /stats             the counters
"""

from __future__ import annotations

import argparse
import threading
import urllib.parse
from typing import Any

from _common import Handler, Server, say, serve, setup_output

NAME = "registry"


class RegistryHandler(Handler):
    server: RegistryServer

    def do_GET(self) -> None:
        parts = urllib.parse.urlsplit(self.path)
        srv = self.server
        if parts.path == "/health":
            self.send_json(200, {"ok": True})
        elif parts.path == "/kv":
            prefix = urllib.parse.parse_qs(parts.query).get("prefix", [""])[0]
            with srv.lock:
                found = {k: v for k, v in srv.kv.items() if k.startswith(prefix)}
            self.send_json(200, found)
        elif parts.path.startswith("/kv/"):
            key = parts.path[len("/kv/") :]
            with srv.lock:
                if key not in srv.kv:
                    self.send_json(404, {"error": f"no key {key}"})
                    return
                value = srv.kv[key]
            self.send_json(200, value)
        elif parts.path == "/stats":
            with srv.lock:
                self.send_json(200, dict(srv.stats))
        else:
            self.send_json(404, {"error": f"no route {parts.path}"})

    def do_PUT(self) -> None:
        if not self.path.startswith("/kv/"):
            self.send_json(404, {"error": f"no route {self.path}"})
            return
        key = self.path[len("/kv/") :]
        value = self.read_json()
        with self.server.lock:
            self.server.kv[key] = value
        say(NAME, f"registered {key} = {value}")
        self.send_json(200, {"ok": True})

    def do_POST(self) -> None:
        if self.path != "/stats":
            self.send_json(404, {"error": f"no route {self.path}"})
            return
        body = self.read_json()
        with self.server.lock:
            for key, value in body.items():
                if isinstance(value, (int, float)):
                    self.server.stats[key] = self.server.stats.get(key, 0) + value
        self.send_json(200, {"ok": True})


class RegistryServer(Server):
    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, RegistryHandler)
        self.lock = threading.Lock()
        self.kv: dict[str, Any] = {}
        self.stats: dict[str, float] = {}


def main() -> None:
    setup_output()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = RegistryServer((args.host, args.port))
    say(NAME, f"listening on http://{args.host}:{args.port}")
    serve(server, NAME)


if __name__ == "__main__":
    main()
