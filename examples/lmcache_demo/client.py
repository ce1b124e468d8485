"""A stand-in engine worker (and benchmark) that talks to the job's LMCache server through
LMCache's own client code, the way vLLM's and SGLang's connectors do. Used by
examples/lmcache-local.yaml and by srt-lmcache's runtime tests.

    client.py vllm tcp://localhost:PORT http://HOST:HTTP_PORT
        connects like vLLM's LMCacheMPConnector (a ZMQ request client on the given URL),
        asks the server its chunk size and pings it, reads /status over HTTP, prints
        "lmcache worker ready ..." and serves until stopped.
    client.py sglang http://HOST:HTTP_PORT
        finds the server the way SGLang's LMCache integration does: LMCache's engine config
        loaded from the environment (LMCACHE_MP_HOST / LMCACHE_MP_PORT, what srt tells the
        workers); then the same checks.
    client.py check http://HOST:HTTP_PORT NAME
        the benchmark: /healthcheck and /status answer healthy; prints "check ok"; exit 0.
"""

from __future__ import annotations

import json
import signal
import sys
import urllib.request
import warnings
from typing import Any

warnings.filterwarnings("ignore")  # google-api-core & co. warn about the Python version


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return json.loads(resp.read())


def talk(server_url: str, http: str, who: str) -> None:
    from lmcache.v1.multiprocess.transport.factory import RequestClientFactory

    client = RequestClientFactory.create(server_url)
    try:
        chunk = client.get_chunk_size().result(timeout=30)
        alive = client.ping(None).result(timeout=30)
    finally:
        client.close()
    status = http_json(f"{http}/status")
    assert status["is_healthy"] is True, status
    print(
        f"lmcache worker ready ({who}): {server_url} chunk_size={chunk} ping={alive}"
        f" engine={status['engine_type']}",
        flush=True,
    )


def serve() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


def main(argv: list[str]) -> int:
    mode = argv[0]
    if mode == "vllm":
        talk(argv[1], argv[2], "vllm")
        serve()
    if mode == "sglang":
        from lmcache.v1.config import load_engine_config_with_overrides

        config = load_engine_config_with_overrides()  # what SGLang's connector reads
        host = str(config.mp_host)
        url = f"{host if '://' in host else 'tcp://' + host}:{int(config.mp_port)}"
        talk(url, argv[1], "sglang")
        serve()
    if mode == "check":
        health = http_json(f"{argv[1]}/healthcheck")
        status = http_json(f"{argv[1]}/status")
        assert health == {"status": "healthy"}, health
        assert status["is_healthy"] is True, status
        print(f"check ok: {argv[2]} healthy", flush=True)
        return 0
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
