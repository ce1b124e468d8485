"""The http probe's body test: a regular expression, or a JMESPath value, over a bounded read
of the answer (plain, chunked, or endless), and a job gated on it end to end."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from srt_services.probes.http import body_matches, http_answer


@asynccontextmanager
async def server(answer: Callable[[int], bytes]) -> AsyncIterator[int]:
    """A one-shot HTTP server on loopback answering the n-th request with ``answer(n)``."""
    count = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        count += 1
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer(count))
        try:
            await writer.drain()
        except ConnectionError:
            pass
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with srv:
        yield srv.sockets[0].getsockname()[1]


def plain(status: int, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def chunked(status: int, body: bytes, size: int = 7) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    chunks = b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts)
    return (
        f"HTTP/1.1 {status} X\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
        + chunks
        + b"0\r\n\r\n"
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


MODELS = json.dumps({"object": "list", "data": [{"id": "other"}, {"id": "tiny"}]}).encode()


@pytest.mark.parametrize("shape", [plain, chunked])
def test_the_body_is_read_whole_when_small(shape: Callable[[int, bytes], bytes]) -> None:
    async def main() -> tuple[int | None, bytes | None, str]:
        async with server(lambda n: shape(200, MODELS)) as port:
            return await http_answer(
                "127.0.0.1", port, f"http://127.0.0.1:{port}/v1/models", 5, 4096
            )

    status, body, detail = run(main())
    assert (status, detail) == (200, "")
    assert body == MODELS


def test_an_endless_body_is_cut_at_the_limit() -> None:
    huge = b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * (4 * 1024 * 1024)

    async def main() -> tuple[int | None, bytes | None, str]:
        async with server(lambda n: huge) as port:
            return await http_answer("127.0.0.1", port, f"http://127.0.0.1:{port}/", 5, 1000)

    status, body, _ = run(main())
    assert status == 200
    assert body is not None and len(body) == 1000


def test_only_the_status_line_without_a_body_test() -> None:
    async def main() -> tuple[int | None, bytes | None, str]:
        async with server(lambda n: plain(503, b"{}")) as port:
            return await http_answer("127.0.0.1", port, f"http://127.0.0.1:{port}/", 5, 0)

    assert run(main()) == (503, None, "")


def test_a_json_value_is_found_in_a_list_or_compared_whole() -> None:
    listed = {"regex": None, "json": "data[].id", "equals": "tiny", "max_bytes": 4096}
    assert body_matches(listed, MODELS).ok
    missing = body_matches({**listed, "equals": "big"}, MODELS)
    assert not missing.ok and "data[].id is ['other', 'tiny'], not 'big'" in missing.detail
    status = {"regex": None, "json": "status", "equals": "ready", "max_bytes": 4096}
    assert body_matches(status, b'{"status": "ready", "endpoints": {}}').ok
    assert not body_matches(status, b'{"status": "notready"}').ok
    not_json = body_matches(status, b"<html>oops</html>")
    assert not not_json.ok and "not JSON" in not_json.detail


def test_a_regex_is_searched_in_the_body() -> None:
    test = {"regex": r'"status":\s*"ready"', "json": None, "equals": None, "max_bytes": 100}
    assert body_matches(test, b'{"x": 1, "status": "ready"}').ok
    assert not body_matches(test, b'{"status": "notready"}').ok


def test_a_job_waits_for_the_body_to_say_ready(srt_jobs: Any, srt_free_port: Any) -> None:
    """The service answers 200 at once but lists its model only from its third answer:
    the unit after it starts only then (a status probe would have let it through at once)."""
    port = srt_free_port()
    script = (
        "import http.server, json\n"
        "n = 0\n"
        "class H(http.server.BaseHTTPRequestHandler):\n"
        "    def do_GET(self):\n"
        "        global n\n"
        "        n += 1\n"
        "        body = json.dumps({'data': [{'id': 'tiny'}] if n >= 3 else []}).encode()\n"
        "        self.send_response(200)\n"
        "        self.send_header('Content-Length', str(len(body)))\n"
        "        self.end_headers()\n"
        "        self.wfile.write(body)\n"
        "        print('answered', n, flush=True)\n"
        "    def log_message(self, *a):\n"
        "        pass\n"
        f"http.server.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    )
    run_ = srt_jobs.run(
        f"""
        schema: 2
        name: body
        observability: {{metrics: false}}
        services:
          - name: models
            command: [python3, -c, {json.dumps(script)}]
            readiness:
              http: {{port: {port}, path: /v1/models, body: {{json: "data[].id", equals: tiny}}}}
              interval_seconds: 0.1
          - name: after
            terminal: true
            command: [bash, -c, "echo after"]
        """
    )
    assert run_.code == 0, run_.stderr
    log = run_.log("service_models")
    assert "answered 3" in log, log
