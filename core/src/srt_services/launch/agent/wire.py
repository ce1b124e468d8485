"""The channel between the orchestrator and its node agents: framing and authentication.

Agents never listen: each one connects out to the orchestrator, whose address it was
given on its command line, so there is nothing on a node another process could connect
to. Both ends then prove that they hold the job's agent key (a random key the orchestrator
writes, mode 0600, into the job directory for this run; the nodes read it from the shared
file system) without sending it, each over a nonce of the other's (a challenge-response
with HMAC-SHA256, so neither proof can be replayed), and derive a session key from both
nonces. Every frame after that is one JSON line carrying a MAC over its direction, its
sequence number and its body: a frame injected into the stream, replayed, reordered or
sent back to its sender fails the check, and the connection is dropped. Nothing but the
job's orchestrator can drive an agent, and nothing but the job's agents can report to it.

A frame is ``<32 hex digits of MAC> <JSON>\\n``; the handshake's three lines are plain JSON.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # asyncio is imported where it is used: the batch script's first
    import asyncio  # moments (launch/slurm/first.py) write the key without it

#: The protocol's version, sent in the agent's first line.
PROTOCOL = 1
#: The longest line either side accepts (a launch carries a service's whole environment).
MAX_LINE = 16 << 20
#: The longest handshake line (before the peer has proved anything).
MAX_HELLO = 4096
#: The longest address text a hello carries.
MAX_ADDR = 1024
KEY_BYTES = 32
_MAC_HEX = 32


# The standard library's json, not orjson: every node agent imports this module at its
# start, and orjson (with the uuid and platform modules it pulls in) cost each agent
# 10-17 ms of CPU there; the frames are small, so its speed buys nothing here.
def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _loads(data: bytes) -> Any:
    """The document in ``data``; ValueError for anything that is not JSON (bad UTF-8
    and nesting deeper than the parser's recursion limit included)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


class ChannelError(Exception):
    """The peer is not who it must be, or broke the protocol: the connection is dropped."""


def write_key(path: str) -> bytes:
    """A fresh agent key in ``path`` (mode 0600, replacing an older one)."""
    key = secrets.token_bytes(KEY_BYTES)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, key.hex().encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return key


def read_key(path: str) -> bytes:
    """The agent key at ``path``; ChannelError when it is missing or malformed."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(KEY_BYTES * 2 + 1)
    except OSError as exc:
        raise ChannelError(f"cannot read the agent key {path}: {exc.strerror}") from None
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise ChannelError(f"{path} does not hold an agent key")
    return key


def _mac(key: bytes, *parts: str) -> bytes:
    return hmac.new(key, "|".join(parts).encode(), hashlib.sha256).digest()


@dataclass(slots=True)
class Session:
    """One authenticated connection's state: the session key and both sequence counters."""

    key: bytes
    #: b"o" for what the orchestrator sends, b"a" for what an agent sends
    mine: bytes
    theirs: bytes
    sent: int = 0
    received: int = 0

    def seal(self, message: dict[str, Any]) -> bytes:
        body = _dumps(message)
        mac = hmac.new(
            self.key, self.mine + self.sent.to_bytes(8, "big") + body, hashlib.sha256
        ).hexdigest()[:_MAC_HEX]
        self.sent += 1
        return mac.encode() + b" " + body + b"\n"

    def open(self, line: bytes) -> dict[str, Any]:
        """The message a sealed ``line`` carries; ChannelError if it is not authentic."""
        mac, _, body = line.rstrip(b"\n").partition(b" ")
        want = hmac.new(
            self.key, self.theirs + self.received.to_bytes(8, "big") + body, hashlib.sha256
        ).hexdigest()[:_MAC_HEX]
        if not hmac.compare_digest(mac, want.encode()):
            raise ChannelError(f"frame {self.received} failed its MAC check")
        self.received += 1
        try:
            message = _loads(body)
        except ValueError as exc:
            raise ChannelError(f"frame {self.received - 1} is not JSON: {exc}") from None
        if not isinstance(message, dict):
            raise ChannelError(f"frame {self.received - 1} is not an object")
        return message


def _session(key: bytes, a: str, b: str, node: str, mine: bytes, theirs: bytes) -> Session:
    return Session(_mac(key, "session", a, b, node), mine, theirs)


async def _line(reader: asyncio.StreamReader, timeout: float, limit: int) -> dict[str, Any]:
    import asyncio

    try:
        async with asyncio.timeout(timeout):
            line = await reader.readline()
    except TimeoutError:
        raise ChannelError(f"no answer within {timeout:g}s") from None
    except (ValueError, asyncio.LimitOverrunError):
        raise ChannelError("handshake line too long") from None
    if not line:
        raise ChannelError("connection closed during the handshake")
    if len(line) > limit:
        raise ChannelError("handshake line too long")
    try:
        doc = _loads(line)
    except ValueError:
        raise ChannelError("handshake line is not JSON") from None
    if not isinstance(doc, dict):
        raise ChannelError("handshake line is not an object")
    return doc


def _text(doc: dict[str, Any], field: str) -> str:
    value = doc.get(field)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise ChannelError(f"handshake: no valid {field!r}")
    return value


async def agent_handshake(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    key: bytes,
    node: str,
    timeout: float = 30.0,
    address: str | None = None,
) -> Session:
    """The agent's side: say who it is (and, when asked, what its node says its address
    is: the raw text the orchestrator picks the address from), check the orchestrator's
    proof, give its own."""
    a = secrets.token_hex(16)
    hello: dict[str, Any] = {"srt_agent": PROTOCOL, "node": node, "pid": os.getpid(), "nonce": a}
    if address is not None:
        hello["addr"] = address[:MAX_ADDR]
    writer.write(_dumps(hello) + b"\n")
    await writer.drain()
    answer = await _line(reader, timeout, MAX_HELLO)
    b = _text(answer, "nonce")
    proof = bytes.fromhex(_text(answer, "proof")) if _hex(answer.get("proof")) else b""
    if not hmac.compare_digest(proof, _mac(key, "orchestrator", a, b, node)):
        raise ChannelError("the orchestrator did not prove it holds the job's agent key")
    writer.write(_dumps({"proof": _mac(key, "agent", a, b, node).hex()}) + b"\n")
    await writer.drain()
    return _session(key, a, b, node, b"a", b"o")


@dataclass(frozen=True, slots=True)
class Hello:
    node: str
    pid: int
    session: Session
    #: what the node said its address is (``hostname -I``, or the site's interface), when
    #: the agent was asked to say it (agents started with the allocation)
    address: str | None = None


async def orchestrator_handshake(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, key: bytes, timeout: float
) -> Hello:
    """The orchestrator's side: read who connects, prove the key, check the agent's proof."""
    hello = await _line(reader, timeout, MAX_HELLO)
    if hello.get("srt_agent") != PROTOCOL:
        raise ChannelError(f"not an srt agent of protocol {PROTOCOL}")
    node = _text(hello, "node")
    a = _text(hello, "nonce")
    pid = hello.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ChannelError("handshake: no valid 'pid'")
    b = secrets.token_hex(16)
    writer.write(_dumps({"nonce": b, "proof": _mac(key, "orchestrator", a, b, node).hex()}) + b"\n")
    await writer.drain()
    answer = await _line(reader, timeout, MAX_HELLO)
    proof = bytes.fromhex(answer["proof"]) if _hex(answer.get("proof")) else b""
    if not hmac.compare_digest(proof, _mac(key, "agent", a, b, node)):
        raise ChannelError(f"a peer calling itself {node!r} did not prove it holds the key")
    addr = hello.get("addr")
    address = addr[:MAX_ADDR] if isinstance(addr, str) else None
    return Hello(node, pid, _session(key, a, b, node, b"o", b"a"), address)


def _hex(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True
