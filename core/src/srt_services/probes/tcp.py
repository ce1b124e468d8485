"""``tcp``: ready when the port accepts a connection from a process of this instance."""

from __future__ import annotations

import asyncio
import errno
import socket
from typing import Any, ClassVar

from pydantic import Field

from srt_services.contracts.context import InstanceContext
from srt_services.contracts.probe import Probe, ProbeResult, ProbeTarget
from srt_services.recipe.models import Port, StrictModel


class TcpConfig(StrictModel):
    port: Port | None = Field(None, description="Port to connect to (roles: the worker's port).")


def _errname(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0, type(exc).__name__)


async def connect_once(host: str, port: int, timeout: float) -> str | None:
    """One non-blocking connect; ``None`` on success, else the reason (``ECONNREFUSED``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        # asyncio.timeout, not wait_for: in 3.11 wait_for can swallow a cancellation that
        # races with the connect finishing, and a probe must always stop when cancelled
        async with asyncio.timeout(timeout):
            await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except TimeoutError:
        return f"connect to {host}:{port} timed out after {timeout:g}s"
    except OSError as exc:
        return _errname(exc)
    finally:
        sock.close()
    return None


def ownership_problem(target: ProbeTarget, port: int) -> str | None:
    owned = target.owns_listener(port)
    if owned is False:
        return f"port {port} answers, but not from a process of this instance"
    return None


class TcpProbe(Probe):
    name: ClassVar[str] = "tcp"
    summary: ClassVar[str] = "A TCP connection to the port is accepted (by this instance)."
    Config: ClassVar[type[TcpConfig]] = TcpConfig
    uses_port: ClassVar[bool] = True

    def port(self, config: Any) -> int | None:
        return config.port  # type: ignore[no-any-return]

    def plan(self, config: Any, ctx: InstanceContext, default_port: int | None) -> dict[str, Any]:
        return {"host": ctx.node.ip, "port": config.port or default_port}

    def describe(self, planned: dict[str, Any]) -> str:
        return f"tcp {planned['host']}:{planned['port']}"

    async def check(self, target: ProbeTarget, attempt_timeout: float) -> ProbeResult:
        cfg = target.config
        failure = await connect_once(cfg["host"], cfg["port"], attempt_timeout)
        if failure is not None:
            return ProbeResult(False, failure)
        stranger = ownership_problem(target, cfg["port"])
        if stranger:
            return ProbeResult(False, stranger)
        return ProbeResult(True)

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        cfg = target.config
        while True:
            await target.wait_port(cfg["host"], cfg["port"], attempt_timeout)
            stranger = ownership_problem(target, cfg["port"])
            if stranger is None:
                return
            target.last_error = stranger
            await target.next_attempt()
