"""``http``: ready when ``GET http://<node_ip>:<port><path>`` answers the expected status,
and, when asked, a body that says so.

While the port is closed the probe costs what a TCP probe costs (one non-blocking connect on
the shared poller); the HTTP request is made only once something listens. Without ``body``
only the status line is read: a 100 MB health body is never downloaded. With it, at most
``body.max_bytes`` of the body are read and matched: a regular expression, or a JMESPath
expression whose result must equal (or, for a list, contain) a value. Some servers answer
200 before they can serve (Dynamo's frontend answers ``/health`` with 200 before any
worker registered, and lists the model in ``/v1/models`` only once one did), and the body
is the only honest gate then. The request is written by hand rather than with an
HTTP client library because a probe needs one ``GET``, and building a client per attempt
(TLS context, pools) cost tens of milliseconds of event-loop time per attempt.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from pydantic import Field, JsonValue, field_validator, model_validator

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


#: The most of a body a probe reads (a larger ``max_bytes`` is refused).
MAX_BODY_BYTES = 1024 * 1024


class BodyMatch(StrictModel):
    """What the answer's body must say (at most ``max_bytes`` of it are read)."""

    regex: str | None = Field(
        None, description="A regular expression the body must match (searched, not anchored)."
    )
    json_path: str | None = Field(
        None,
        alias="json",
        description="A JMESPath expression over the body parsed as JSON (`data[].id`,"
        " `status`); its result must equal `equals`, or contain it when it is a list.",
    )
    equals: JsonValue = Field(
        None, description="The value `json` must give (placeholders allowed in text)."
    )
    max_bytes: int = Field(
        65536, ge=1, le=MAX_BODY_BYTES, description="Most bytes of the body read."
    )

    @model_validator(mode="after")
    def _one_test(self) -> BodyMatch:
        if (self.regex is None) == (self.json_path is None):
            raise ValueError("give either regex or json")
        return self

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            import regex

            try:
                regex.compile(value)
            except regex.error as exc:
                raise ValueError(f"is not a regular expression: {exc}") from None
        return value

    @field_validator("json_path")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None:
            import jmespath
            from jmespath.exceptions import ParseError

            try:
                jmespath.compile(value)
            except ParseError as exc:
                raise ValueError(f"is not a JMESPath expression: {exc}") from None
        return value


class HttpConfig(StrictModel):
    port: Port | None = Field(None, description="Port (roles: the worker's port).")
    path: str = Field("/health", description="Request path.")
    status: int | None = Field(
        None,
        ge=100,
        le=599,
        description="Expected status; by default any 2xx or 3xx counts as ready.",
    )
    body: BodyMatch | None = Field(
        None,
        description="What the body must say besides the status: `{regex: ...}` or"
        " `{json: data[].id, equals: my-model}` (a bounded read).",
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
        planned: dict[str, Any] = {
            "host": host,
            "port": port,
            "url": f"http://{shown}:{port}{_one_line(path)}",
            "status": config.status,
        }
        if config.body is not None:
            planned["body"] = _planned_body(config.body, ctx)
        return planned

    def describe(self, planned: dict[str, Any]) -> str:
        want = planned["status"] if planned["status"] is not None else "2xx/3xx"
        body = planned.get("body")
        if body is None:
            return f"http {planned['url']} -> {want}"
        if body.get("regex") is not None:
            return f"http {planned['url']} -> {want}, body ~ /{body['regex']}/"
        return f"http {planned['url']} -> {want}, {body['json']} = {body['equals']!r}"

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
        body_test = cfg.get("body")
        limit = int(body_test["max_bytes"]) if body_test is not None else 0
        status, body, detail = await http_answer(
            cfg["host"], cfg["port"], cfg["url"], attempt_timeout, limit
        )
        if status is None:
            return ProbeResult(False, detail)
        if not status_ok(status, cfg["status"]):
            return ProbeResult(False, f"HTTP {status}")
        if body_test is None:
            return ProbeResult(True)
        return body_matches(body_test, body or b"")

    async def wait_ready(self, target: ProbeTarget, attempt_timeout: float) -> None:
        cfg = target.config
        while True:
            await target.wait_port(cfg["host"], cfg["port"], min(attempt_timeout, 1.0))
            result = await self._request(target, attempt_timeout)
            if result.ok:
                return
            target.last_error = result.detail
            await target.next_attempt()


def _planned_body(body: BodyMatch, ctx: InstanceContext) -> dict[str, Any]:
    """The body test as plain JSON, its text rendered with the instance's placeholders."""

    def text(value: Any) -> Any:
        return render(value, ctx.values) if isinstance(value, str) and "{" in value else value

    return {
        "regex": text(body.regex),
        "json": body.json_path,
        "equals": text(body.equals),
        "max_bytes": body.max_bytes,
    }


def body_matches(test: dict[str, Any], body: bytes) -> ProbeResult:
    """Whether a body (already cut at ``max_bytes``) passes the planned test."""
    text = body.decode(errors="replace")
    if test.get("regex") is not None:
        import regex

        try:
            found = regex.search(test["regex"], text, timeout=0.1)
        except TimeoutError:
            return ProbeResult(False, "the body pattern took too long to match")
        if found:
            return ProbeResult(True)
        return ProbeResult(False, f"body does not match /{test['regex']}/: {_excerpt(text)}")
    import jmespath
    import orjson

    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return ProbeResult(False, f"body is not JSON: {_excerpt(text)}")
    got = jmespath.search(test["json"], data)
    want = test.get("equals")
    if got == want or (isinstance(got, list) and want in got):
        return ProbeResult(True)
    return ProbeResult(False, f"{test['json']} is {_excerpt(repr(got))}, not {want!r}")


def _excerpt(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


async def http_status(host: str, port: int, url: str, timeout: float) -> tuple[int | None, str]:
    """Status code of ``GET url`` (reading only the status line), or ``(None, reason)``."""
    status, _, detail = await http_answer(host, port, url, timeout, 0)
    return status, detail


async def http_answer(
    host: str, port: int, url: str, timeout: float, body_bytes: int
) -> tuple[int | None, bytes | None, str]:
    """``(status, body, "")`` of ``GET url``, or ``(None, None, reason)``.

    With ``body_bytes`` 0 only the status line is read; otherwise at most that many bytes
    of the body (after the headers; a chunked body is decoded), so a probe never holds more
    than it asked for whatever the server sends.
    """
    path = url.split("/", 3)[3] if url.count("/") >= 3 else ""
    shown = url_host(host)
    request = (
        f"GET /{path} HTTP/1.1\r\nHost: {shown}:{port}\r\nUser-Agent: srt-probe\r\n"
        "Accept: */*\r\nConnection: close\r\n\r\n"
    ).encode()
    writer = None
    body: bytes | None = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(host, port, limit=65536)
            writer.write(request)
            await writer.drain()
            line = await reader.readline()
            status, detail = _status(line)
            if status is not None and body_bytes > 0:
                body = await _read_body(reader, body_bytes)
    except TimeoutError:
        return None, None, f"no answer within {timeout:g}s"
    except (OSError, ValueError) as exc:
        return None, None, f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    return status, body, detail


def _status(line: bytes) -> tuple[int | None, str]:
    parts = line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        text = line[:80].decode(errors="replace").strip()
        return (
            None,
            f"not an HTTP answer: {text!r}" if text else "connection closed without an answer",
        )
    return int(parts[1]), ""


#: Header lines a probe reads before it gives up on an answer (a server that never ends
#: its headers cannot make the probe read forever).
MAX_HEADERS = 100


async def _read_body(reader: asyncio.StreamReader, limit: int) -> bytes:
    """At most ``limit`` bytes of the body: plain, or decoded from chunks."""
    chunked = False
    length: int | None = None
    for _ in range(MAX_HEADERS):
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
        elif key == b"content-length" and value.strip().isdigit():
            length = int(value.strip())
    else:
        raise ValueError(f"more than {MAX_HEADERS} header lines")
    if not chunked:
        want = limit if length is None else min(limit, length)
        return await _read_at_most(reader, want)
    out = bytearray()
    while len(out) < limit:
        size_line = await reader.readline()
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            break
        out += await _read_at_most(reader, min(size, limit - len(out)))
        if len(out) >= limit:
            break
        await reader.readline()  # the CRLF after the chunk
    return bytes(out)


async def _read_at_most(reader: asyncio.StreamReader, want: int) -> bytes:
    out = bytearray()
    while len(out) < want:
        chunk = await reader.read(want - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)
