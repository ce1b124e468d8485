"""The node agent's control socket: one JSON request per connection, one JSON answer.

A Unix socket (mode 0600, so only the agent's user may admit work) carrying a line of JSON
each way is the smallest interface that lets a job stage wait for its admission as long as
starting its services takes, lets anything (``srt oarbank admit``, a Slurm prolog, a test)
talk to the agent without importing it, and needs no port. Requests::

    {"op": "admit", "attempt_id": "a1", "needs": ["colima/vm"], "pools": {"colima/vm": 1},
     "needs_pools": [], "mem_gb": 4, "timeout_s": 600}
    {"op": "release", "attempt_id": "a1"}
    {"op": "status"}
    {"op": "doctor"}
    {"op": "reset", "capability": "colima/vm"}

Answers are ``{"ok": true, ...}`` or ``{"ok": false, "error": "<message>", "kind":
"<exception class>", "retryable": bool}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from oarbank_protocol.numbers import refuse_constant

MAX_REQUEST: Final = 1024 * 1024
#: sun_path holds 108 bytes on Linux, the terminating NUL included.
MAX_SOCKET_PATH: Final = 107

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise ValueError(
            f"socket path {path} is longer than {MAX_SOCKET_PATH} bytes (a Unix socket limit); "
            "choose a shorter --socket"
        )


async def serve(path: Path, handler: Handler) -> asyncio.AbstractServer:
    """Listen on ``path`` (replacing a stale socket file) and answer with ``handler``."""
    check_socket_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if path.is_socket():
            path.unlink()

    async def client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            if len(line) > MAX_REQUEST:
                answer = {"ok": False, "error": "request too large", "kind": "UsageError"}
            else:
                try:
                    request = json.loads(line, parse_constant=refuse_constant)
                except ValueError as exc:
                    request = None
                    answer = {"ok": False, "error": f"not JSON: {exc}", "kind": "UsageError"}
                if isinstance(request, dict):
                    answer = await handler(request)
                elif request is not None:
                    answer = {"ok": False, "error": "expected an object", "kind": "UsageError"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_unix_server(client, path=str(path), limit=MAX_REQUEST + 1)
    os.chmod(path, 0o600)
    return server


def request(path: Path, payload: dict[str, Any], timeout_s: float | None = None) -> dict[str, Any]:
    """Send one request to the agent at ``path`` and return its answer (blocking)."""
    check_socket_path(path)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(str(path))
        sock.sendall(json.dumps(payload).encode() + b"\n")
        chunks = []
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                break
    data = b"".join(chunks)
    if not data:
        raise ConnectionError(f"the agent at {path} closed the connection without answering")
    answer: dict[str, Any] = json.loads(data)
    return answer
