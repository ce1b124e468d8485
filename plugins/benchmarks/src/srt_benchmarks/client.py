"""The HTTP side of every benchmark: one pooled httpx client per run, loopback-safe.

``trust_env=False``: a proxy variable in the job's environment must not send benchmark
traffic (or the frontend's address) anywhere else. Requests are streamed Server-Sent
Events, read line by line as they arrive, so first-token and inter-token times are the
client's own observations.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


def make_client(concurrency: int, timeout: float) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    return httpx.AsyncClient(
        limits=limits, timeout=httpx.Timeout(timeout, connect=30.0), trust_env=False
    )


class RequestFailed(Exception):
    """A request the benchmark counts as failed (status, error event, broken stream)."""


async def stream_events(
    client: httpx.AsyncClient, url: str, payload: dict[str, Any]
) -> AsyncIterator[dict[str, Any]]:
    """The JSON events of one streamed OpenAI-style request, up to ``[DONE]``."""
    async with client.stream("POST", url, json=payload) as response:
        if response.status_code != 200:
            body = (await response.aread()).decode("utf-8", "replace")[:300]
            raise RequestFailed(f"HTTP {response.status_code}: {body}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                return
            event = json.loads(data)
            if isinstance(event, dict) and "error" in event:
                raise RequestFailed(f"error event: {str(event['error'])[:300]}")
            yield event
    raise RequestFailed("the stream ended without [DONE]")


async def served_model(client: httpx.AsyncClient, base: str) -> str:
    """The only model the frontend serves (the name was not known at plan time)."""
    response = await client.get(f"{base}/v1/models")
    response.raise_for_status()
    ids = [m["id"] for m in response.json().get("data", [])]
    if len(ids) != 1:
        raise SystemExit(
            f"benchmark: the frontend lists {len(ids)} models ({', '.join(ids) or 'none'});"
            " name one in benchmark.options.model"
        )
    return str(ids[0])
