"""A small process that serves Prometheus metrics (examples/metrics.yaml; srt-exporters'
runtime tests and bench/metrics_overhead.py run it too).

``metrics_server.py HOST PORT NAME``: serves ``/metrics`` (and ``/health``) with the
counter ``NAME`` growing by 10 a second since the start, so a scrape shows it moving.
"""

from __future__ import annotations

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOST, PORT, NAME = sys.argv[1], int(sys.argv[2]), sys.argv[3]
T0 = time.monotonic()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/health":
            body = b"ok\n"
        else:
            value = int((time.monotonic() - T0) * 10)
            body = (f"# TYPE {NAME} counter\n{NAME} {value}\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


server = ThreadingHTTPServer((HOST, PORT), Handler)
print(f"serving {NAME} on {HOST}:{PORT}", flush=True)
server.serve_forever()
