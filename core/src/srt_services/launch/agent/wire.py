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

Every node agent imports this module before it has launched anything, so it stays on the
standard library's cheapest parts: no asyncio (the agent's side of the handshake runs on a
blocking socket, :func:`agent_handshake`), no dataclasses or typing (building a dataclass
costs about 0.7 ms, and typing ~10 ms of import), no ``secrets`` (``os.urandom`` is what it
reads).
"""

from __future__ import annotations

import os
import time
from _operator import _compare_digest as compare_digest  # what hmac.compare_digest is

TYPE_CHECKING = False
if TYPE_CHECKING:
    # asyncio is imported where it is used: neither the batch script's first moments
    # (launch/slurm/first.py) nor an agent's start need it
    import _socket
    import asyncio
    from typing import Any

if TYPE_CHECKING:
    from hashlib import sha256
else:
    try:  # the interpreter's own SHA-256: hashlib's loads OpenSSL's libcrypto (~3 ms a node)
        from _sha256 import sha256
    except ImportError:  # pragma: no cover - a build without it
        from hashlib import sha256

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


# JSON through the standard library's C accelerator (``_json``), which is what ``json``
# itself runs, without ``json``: its Python layer imports ``re`` (the decoder's and the
# encoder's regular expressions, compiled at import), ~6 ms of CPU in every node agent
# before its first launch. Not orjson either: it (with the uuid and platform modules it
# pulls in) cost each agent 10-17 ms there; the frames are small, its speed buys nothing.
# The bytes are json.dumps's and what is read is json.loads's (a test compares both).
try:
    import _json
except ImportError:  # pragma: no cover - a build without the accelerator
    _json = None  # type: ignore[assignment]


def _unencodable(o: Any) -> Any:
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


class _Decoding:
    """What ``_json``'s scanner reads off a decoder: json.loads's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {
        "-Infinity": float("-inf"),
        "Infinity": float("inf"),
        "NaN": float("nan"),
    }.__getitem__


# (typeshed types the scanner's context as a scanner: it is anything with these attributes)
_scan = _json.make_scanner(_Decoding()) if _json is not None else None  # type: ignore[arg-type]


def _dumps(doc: dict[str, Any]) -> bytes:
    """``json.dumps(doc, separators=(",", ":"))``, encoded (ASCII: non-ASCII is escaped)."""
    if _json is None:  # pragma: no cover - a build without the accelerator
        import json

        return json.dumps(doc, separators=(",", ":")).encode()
    # what json.dumps runs for these arguments: circular references checked (``{}``), no
    # indent, no key sorting, no skipped keys, NaN and the infinities allowed
    encode = _json.make_encoder(
        {}, _unencodable, _json.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    return "".join(encode(doc, 0)).encode()


def _loads(data: bytes) -> Any:
    """The document in ``data``; ValueError for anything that is not JSON (bad UTF-8
    and nesting deeper than the parser's recursion limit included).

    The scanner reads a frame as it comes (UTF-8, no leading space); anything it does not
    take goes to json.loads, which reads what else JSON allows or says what is wrong (the
    scanner's own errors need ``json.decoder`` loaded: without it they surface as
    StopIteration or a SystemError)."""
    try:
        if _scan is not None:
            try:
                text = data.decode()
                doc, end = _scan(text, 0)
                if not text[end:].strip(" \t\n\r"):
                    return doc
            except (StopIteration, SystemError, ValueError):
                pass
        import json

        return json.loads(data)
    except RecursionError:
        raise ValueError("nested too deeply") from None


class ChannelError(Exception):
    """The peer is not who it must be, or broke the protocol: the connection is dropped."""


def _nonce() -> str:
    return os.urandom(16).hex()


def write_key(path: str) -> bytes:
    """A fresh agent key in ``path`` (mode 0600, replacing an older one)."""
    key = os.urandom(KEY_BYTES)
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


_BLOCK = 64
_IPAD = bytes(x ^ 0x36 for x in range(256))
_OPAD = bytes(x ^ 0x5C for x in range(256))


class Hmac:
    """HMAC-SHA256 (RFC 2104) with one key: the pads are hashed once, each message
    copies them. The same digests as ``hmac.new(key, msg, hashlib.sha256)`` (a test
    checks), without loading libcrypto in every node agent."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            key = sha256(key).digest()
        key = key.ljust(_BLOCK, b"\0")
        self._inner = sha256(key.translate(_IPAD))
        self._outer = sha256(key.translate(_OPAD))

    def digest(self, msg: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(msg)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


def _mac(key: bytes, *parts: str) -> bytes:
    return Hmac(key).digest("|".join(parts).encode())


class Session:
    """One authenticated connection's state: the session key and both sequence counters."""

    __slots__ = ("_hmac", "key", "mine", "received", "sent", "theirs")

    def __init__(self, key: bytes, mine: bytes, theirs: bytes) -> None:
        self.key = key
        self._hmac = Hmac(key)
        #: b"o" for what the orchestrator sends, b"a" for what an agent sends
        self.mine = mine
        self.theirs = theirs
        self.sent = 0
        self.received = 0

    def seal(self, message: dict[str, Any]) -> bytes:
        body = _dumps(message)
        mac = self._hmac.digest(self.mine + self.sent.to_bytes(8, "big") + body).hex()[:_MAC_HEX]
        self.sent += 1
        return mac.encode() + b" " + body + b"\n"

    def open(self, line: bytes) -> dict[str, Any]:
        """The message a sealed ``line`` carries; ChannelError if it is not authentic."""
        mac, _, body = line.rstrip(b"\n").partition(b" ")
        want = self._hmac.digest(self.theirs + self.received.to_bytes(8, "big") + body)
        if not compare_digest(mac, want.hex()[:_MAC_HEX].encode()):
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
    return _doc(line)


def _text(doc: dict[str, Any], field: str) -> str:
    value = doc.get(field)
    if not isinstance(value, str) or not value or len(value) > 256:
        raise ChannelError(f"handshake: no valid {field!r}")
    return value


class Lines:
    """Lines from a blocking socket, each by a deadline: the agent's side of the channel
    before it has an event loop (its handshake, its setup, its first launches). What was
    read past the last line stays in :attr:`buffer` for whoever reads on."""

    def __init__(self, sock: _socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def take(self) -> bytes | None:
        """The next whole line already read, or ``None``."""
        at = self.buffer.find(b"\n")
        if at < 0:
            return None
        line, self.buffer = self.buffer[: at + 1], self.buffer[at + 1 :]
        return line

    def fill(self, limit: int) -> bool:
        """Read what the socket has (it is readable); False when the peer closed it.
        ChannelError when a line grows past ``limit``."""
        data = self.sock.recv(1 << 16)
        if not data:
            return False
        self.buffer += data
        if b"\n" not in self.buffer and len(self.buffer) > limit:
            raise ChannelError("a line longer than the channel allows")
        return True

    def readline(self, timeout: float, limit: int) -> bytes:
        """The next line within ``timeout`` seconds; ChannelError otherwise."""
        deadline = time.monotonic() + timeout
        while (line := self.take()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelError(f"no answer within {timeout:g}s")
            self.sock.settimeout(left)
            try:
                if not self.fill(limit):
                    raise ChannelError("connection closed during the handshake")
            except TimeoutError:
                raise ChannelError(f"no answer within {timeout:g}s") from None
            except OSError as exc:
                raise ChannelError(f"connection error: {exc}") from None
            finally:
                self.sock.settimeout(None)
        if len(line) > limit:
            raise ChannelError("handshake line too long")
        return line


def _doc(line: bytes) -> dict[str, Any]:
    try:
        doc = _loads(line)
    except ValueError:
        raise ChannelError("handshake line is not JSON") from None
    if not isinstance(doc, dict):
        raise ChannelError("handshake line is not an object")
    return doc


def agent_handshake(
    lines: Lines, key: bytes, node: str, timeout: float = 30.0, address: str | None = None
) -> Session:
    """The agent's side, on a blocking socket: say who it is (and, when asked, what its
    node says its address is: the raw text the orchestrator picks the address from), check
    the orchestrator's proof, give its own."""
    a = _nonce()
    hello: dict[str, Any] = {"srt_agent": PROTOCOL, "node": node, "pid": os.getpid(), "nonce": a}
    if address is not None:
        hello["addr"] = address[:MAX_ADDR]
    try:
        lines.sock.sendall(_dumps(hello) + b"\n")
        answer = _doc(lines.readline(timeout, MAX_HELLO))
        b = _text(answer, "nonce")
        proof = bytes.fromhex(_text(answer, "proof")) if _hex(answer.get("proof")) else b""
        if not compare_digest(proof, _mac(key, "orchestrator", a, b, node)):
            raise ChannelError("the orchestrator did not prove it holds the job's agent key")
        lines.sock.sendall(_dumps({"proof": _mac(key, "agent", a, b, node).hex()}) + b"\n")
    except OSError as exc:
        raise ChannelError(f"connection error: {exc}") from None
    return _session(key, a, b, node, b"a", b"o")


class Hello:
    """Who connected: its node, its PID, its session."""

    __slots__ = ("address", "node", "pid", "session")

    def __init__(self, node: str, pid: int, session: Session, address: str | None = None) -> None:
        self.node = node
        self.pid = pid
        self.session = session
        #: what the node said its address is (``hostname -I``, or the site's interface),
        #: when the agent was asked to say it (agents started with the allocation)
        self.address = address


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
    b = _nonce()
    writer.write(_dumps({"nonce": b, "proof": _mac(key, "orchestrator", a, b, node).hex()}) + b"\n")
    await writer.drain()
    answer = await _line(reader, timeout, MAX_HELLO)
    proof = bytes.fromhex(answer["proof"]) if _hex(answer.get("proof")) else b""
    if not compare_digest(proof, _mac(key, "agent", a, b, node)):
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
