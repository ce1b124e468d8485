"""Helpers of the tests that run the real Dynamo: free ports, the chat load, NATS's counters.

The mocker's completions are token ids outside the tiny vocabulary, so the text is empty:
a request succeeded when it answered 200 with ``max_tokens`` completion tokens and
``finish_reason == "length"``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import random
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx
from srt_services.testing import needs

REQUIRED_BY = "SRT_REQUIRE_DYNAMO"


def require_dynamo() -> None:
    """Skip without Dynamo next to srt (fail under ``SRT_REQUIRE_DYNAMO=1``): the engine
    runs ``{python} -m dynamo.*``, the interpreter these tests run under."""
    if (
        importlib.util.find_spec("dynamo") is None
        or importlib.util.find_spec("dynamo.mocker") is None
    ):
        needs.missing(
            "needs Dynamo next to srt: pip install --no-deps -r plugins/dynamo/requirements-dynamo.txt",
            REQUIRED_BY,
        )
    for binary in ("etcd", "nats-server"):
        if needs.venv_script(binary) is None:
            needs.missing(f"needs {binary} (apt-get install etcd-server nats-server)", REQUIRED_BY)


def _free(port: int) -> bool:
    for host in ("0.0.0.0", "127.0.0.1"):  # a bootstrap server binds every address
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_block(count: int) -> int:
    """The first of ``count`` consecutive free ports (srtctl's formulas add to a base)."""
    rng = random.Random()
    for _ in range(200):
        # below 32767: Dynamo reads DYN_SYSTEM_PORT as a signed 16-bit number
        base = rng.randrange(20000, 32000)
        if all(_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no block of free ports")


@dataclass
class Chat:
    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        if self.status != 200:
            return False
        choice = self.body["choices"][0]
        return bool(choice["finish_reason"] == "length")


async def _chats(url: str, model: str, count: int, max_tokens: int) -> list[Chat]:
    payload = {
        "model": model,
        "messages": [{"role": "user", "content": "what is two plus two?"}],
        "max_tokens": max_tokens,
    }
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(base_url=url, timeout=60.0, limits=limits) as client:

        async def one() -> Chat:
            r = await client.post("/v1/chat/completions", json=payload)
            body = r.json() if r.content else {}
            return Chat(r.status_code, body)

        return list(await asyncio.gather(*(one() for _ in range(count))))


def chat_load(url: str, model: str, count: int = 24, max_tokens: int = 16) -> list[Chat]:
    """``count`` concurrent chat completions; each must end by length with ``max_tokens``
    completion tokens (the mocker's text is empty)."""
    done = asyncio.run(_chats(url, model, count, max_tokens))
    bad = [
        c
        for c in done
        if not c.ok or c.body.get("usage", {}).get("completion_tokens") != max_tokens
    ]
    assert not bad, f"{len(bad)}/{count} chats failed: {[(c.status, c.body) for c in bad[:3]]}"
    return done


def nats_counters(monitor: int) -> dict[str, int]:
    """nats-server's own counters (``/varz``): messages in and out, client connections."""
    varz = httpx.get(f"http://127.0.0.1:{monitor}/varz", timeout=5).json()
    return {k: int(varz[k]) for k in ("in_msgs", "out_msgs", "connections")}


def wait_listed(url: str, model: str, timeout: float = 60.0) -> None:
    """Until the frontend lists ``model`` (a restarted worker registered again)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            data = httpx.get(f"{url}/v1/models", timeout=2).json()
            if any(m.get("id") == model for m in data.get("data", [])):
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{model} never listed by {url}/v1/models")
