"""``http``: ready when ``GET http://<node_ip>:<port><path>`` answers the expected status.

While the port is closed the probe costs what a TCP probe costs (one non-blocking connect on
the shared poller); the HTTP request is made only once something listens. Only the status
line is read: a 100 MB health body is never downloaded. The request is written by hand
rather than with an HTTP client library because a probe needs one ``GET`` and one status
code, and building a client per attempt (TLS context, pools) cost tens of milliseconds of
event-loop time per attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import Field, field_validator

from srt_services.contracts.context import InstanceContext
from srt_services.contracts.probe import Probe, ProbeResult, ProbeTarget
from srt_services.contracts.servers import url_host
from srt_services.probes.tcp import connect_once, ownership_problem
from srt_services.recipe.models import Port, StrictModel
from srt_services.recipe.placeholders import render


def _one_line(path: str) -> str:
    """``path`` with spaces and control characters percent-encoded: whatever a rendered
    value brought in, the request stays one line (no header can be smuggled in)."""
    return "".join(f"%{ord(c):02X}" if ord(c) <= 0x20 or ord(c) == 0x7F else c for c in path)


class HttpConfig(StrictModel):
    port: Port | None = Field(None, description="Port (roles: the worker's port).")
    path: str = Field("/health", description="Request path.")
    status: int | None = Field(
        None,
        ge=100,
        le=599,
        description="Expected status; by default any 2xx or 3xx counts as ready.",
    )

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must start with '/'")
        return value


def status_ok(status: int, expected: int | None) -> bool:
    return status == expected if expected is not None else 200 <= status < 400


class HttpProbe(Probe):
    name: ClassVar[str] = "http"
    summary: ClassVar[str] = "GET on the node's address answers the expected status (2xx/3xx)."
    Config: ClassVar[type[HttpConfig]] = HttpConfig
    uses_port: ClassVar[bool] = True

    def port(self, config: Any) -> int | None:
        return config.port  # type: ignore[no-any-return]

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        port = config.port or default_port
        host = ctx.node.ip
        shown = url_host(host)
        # the one setting placeholders reach (the checks allow them there, as for log/file)
        path = render(config.path, ctx.values) if "{" in config.path else config.path
        return {
            "host": host,
            "port": port,
            "url": f"http://{shown}:{port}{_one_line(path)}",
            "status": config.status,
        }

    def describe(self, planned: dict[str, Any]) -> str:
        want = planned["status"] if planned["status"] is not None else "2xx/3xx"
        return f"http {planned['url']} -> {want}"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        cfg = target.config
        failure = await connect_once(cfg["host"], cfg["port"], attempt_timeout)
        if failure is not None:
            return ProbeResult(False, failure)
        return await self._request(target, attempt_timeout)

    async def _request(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        cfg = target.config
        stranger = ownership_problem(target, cfg["port"])
        if stranger:
            return ProbeResult(False, stranger)
        status, detail = await http_status(cfg["host"], cfg["port"], cfg["url"], attempt_timeout)
        if status is None:
            return ProbeResult(False, detail)
        if status_ok(status, cfg["status"]):
            return ProbeResult(True)
        return ProbeResult(False, f"HTTP {status}")

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        cfg = target.config
        while True:
            await target.wait_port(cfg["host"], cfg["port"], min(attempt_timeout, 1.0))
            result = await self._request(target, attempt_timeout)
            if result.ok:
                return
            target.last_error = result.detail
            await target.next_attempt()


async def http_status(host: str, port: int, url: str, timeout: float) -> tuple[int | None, str]:
    """Status code of ``GET url`` (reading only the status line), or ``(None, reason)``."""
    path = url.split("/", 3)[3] if url.count("/") >= 3 else ""
    shown = url_host(host)
    request = (
        f"GET /{path} HTTP/1.1\r\nHost: {shown}:{port}\r\nUser-Agent: srt-probe\r\n"
        "Accept: */*\r\nConnection: close\r\n\r\n"
    ).encode()
    writer = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(request)
            await writer.drain()
            line = await reader.readline()
    except TimeoutError:
        return None, f"no answer within {timeout:g}s"
    except (OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        text = line[:80].decode(errors="replace").strip()
        return (
            None,
            f"not an HTTP answer: {text!r}" if text else "connection closed without an answer",
        )
    return int(parts[1]), ""
