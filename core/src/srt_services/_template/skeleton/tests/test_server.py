"""The example server itself, started for real on a free loopback port."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable


def test_server_answers_health_and_message(srt_free_port: Callable[[], int]) -> None:
    port = srt_free_port()
    env = {**os.environ, "{{ENV}}_MESSAGE": "from the test"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "{{package}}.server", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    assert r.read() == b"ok\n"
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as r:
            assert r.read() == b"from the test\n"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
