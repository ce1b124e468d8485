#!/usr/bin/env python3
"""STAND-IN for NVIDIA's dcgm-exporter (no GPU, no DCGM on these machines).

Takes dcgm-exporter's argv (``--collect-interval=MS --address HOST:PORT``) and serves the
metric names and labels dcgm-exporter serves (``DCGM_FI_DEV_GPU_UTIL``,
``DCGM_FI_DEV_FB_USED``...) with made-up values, so srt's plan, launch, scrape and
``srt metrics`` are tested end to end. With ``DCGM_STANDIN_NO_GPU=1`` it fails the way the
real one does without NVML: the message, then exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--collect-interval", type=int, required=True)
parser.add_argument("--address", required=True)
args = parser.parse_args()

if os.environ.get("DCGM_STANDIN_NO_GPU") == "1":
    print(
        'time="2024-01-01T00:00:00Z" level=fatal msg="Error: Failed to initialize NVML"',
        file=sys.stderr,
        flush=True,
    )
    sys.exit(1)

host, _, port = args.address.rpartition(":")
T0 = time.monotonic()
FIELDS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
)


def page() -> bytes:
    t = time.monotonic() - T0
    out = []
    for name, kind, help_text in FIELDS:
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for gpu in (0, 1):
            labels = (
                f'gpu="{gpu}",UUID="GPU-standin-{gpu}",device="nvidia{gpu}",modelName="stand-in"'
            )
            value = {"DCGM_FI_DEV_GPU_UTIL": (40 + 10 * gpu + t) % 100}.get(name, 1000 + gpu)
            out.append(f"{name}{{{labels}}} {value:.1f}")
    return ("\n".join(out) + "\n").encode()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = page()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        pass


print(f"dcgm-exporter stand-in on {host}:{port} every {args.collect_interval} ms", flush=True)
ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
