"""Several frontends behind nginx (``frontend.replicas``): the balancer on the head node's
public port spreads requests over replicas on the other worker nodes, each on its own
virtual node address; a real nginx (Debian's) runs it."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(shutil.which("nginx") is None, reason="needs nginx (nginx-light)")

REPLICA = (
    "import http.server, os, sys\n"
    "name = os.environ['SRT_INSTANCE']\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        body = name.encode()\n"
    "        self.send_response(200)\n"
    "        self.send_header('Content-Length', str(len(body)))\n"
    "        self.end_headers()\n"
    "        self.wfile.write(body)\n"
    "    def log_message(self, *a):\n"
    "        pass\n"
    "http.server.ThreadingHTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()\n"
)

BENCH = (
    "import os, urllib.request\n"
    "url = os.environ['SRT_FRONTEND_URL']\n"
    "seen = {}\n"
    "for _ in range(40):\n"
    "    name = urllib.request.urlopen(url + '/x', timeout=5).read().decode()\n"
    "    seen[name] = seen.get(name, 0) + 1\n"
    "print('seen', sorted(seen.items()), flush=True)\n"
    "assert len(seen) == 2, seen\n"
)


def test_requests_are_spread_over_the_replicas(srt_jobs: Any, srt_free_port: Any) -> None:
    public, internal = srt_free_port(), srt_free_port()
    run = srt_jobs.run(
        f"""
        schema: 2
        name: replicas
        observability: {{metrics: false}}
        resources: {{gpus_per_node: 1}}
        frontend:
          type: sglang
          port: {public}
          internal_port: {internal}
          replicas: 2
          command: [python3, -c, {json.dumps(REPLICA)}, "{{node_ip}}", "{internal}"]
          readiness: {{tcp: {{port: {internal}}}}}
        roles:
          agg: {{workers: 3, command: [sleep, "1000"]}}
        benchmark: {{type: command, command: [python3, -c, {json.dumps(BENCH)}]}}
        """,
        timeout=90,
    )
    assert run.code == 0, run.stdout + run.stderr
    out = run.log("benchmark")
    assert "('frontend_0'," in out and "('frontend_1'," in out, out
    assert "frontend_balancer" in run.stdout
