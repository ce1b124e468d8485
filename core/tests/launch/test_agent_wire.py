"""The agents' channel: both ends prove the job's key, and every frame is authentic.

Over real TCP connections on loopback: a peer without the key (an impostor agent, an
impostor orchestrator) is refused by the handshake; after it, a frame that was changed,
replayed, reordered or sent back to its sender fails its check; and whatever bytes arrive,
opening a frame either yields an object or raises :class:`ChannelError` (fuzzed).
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from srt_services.launch.agent import wire


def test_the_key_file_is_private_and_read_back(tmp_path: Path) -> None:
    path = str(tmp_path / "k")
    key = wire.write_key(path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert wire.read_key(path) == key
    assert wire.write_key(path) != key, "every run gets a new key"
    Path(path).write_text("not hex")
    with pytest.raises(wire.ChannelError, match="does not hold an agent key"):
        wire.read_key(path)
    with pytest.raises(wire.ChannelError, match="cannot read"):
        wire.read_key(str(tmp_path / "missing"))


Side = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[Any]]
#: the agent's side runs on a blocking socket, as the agent's first part does
AgentSide = Callable[[socket.socket], Any]


async def _pair(orchestrator: Side, agent: AgentSide) -> tuple[Any, Any]:
    """Run both sides over a real loopback connection; each side's result or exception."""
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            done.set_result(await orchestrator(reader, writer))
        except Exception as exc:
            done.set_result(exc)
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]

    def agent_side() -> Any:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.settimeout(None)
            try:
                return agent(sock)
            except Exception as exc:
                return exc

    try:
        mine = await asyncio.to_thread(agent_side)
        return await asyncio.wait_for(done, 10), mine
    finally:
        server.close()


def _orch(key: bytes) -> Side:
    return lambda r, w: wire.orchestrator_handshake(r, w, key, 5.0)


def _agent(key: bytes, node: str = "n1") -> AgentSide:
    return lambda sock: wire.agent_handshake(wire.Lines(sock), key, node, 5.0)


def test_both_ends_that_hold_the_key_agree_on_a_session() -> None:
    key = os.urandom(wire.KEY_BYTES)
    hello, session = asyncio.run(_pair(_orch(key), _agent(key, "n7")))
    assert isinstance(hello, wire.Hello) and isinstance(session, wire.Session)
    assert hello.node == "n7" and hello.pid == os.getpid()
    # what one side seals the other opens, in order, both ways
    for n in range(3):
        assert hello.session.open(session.seal({"ev": "beat", "n": n})) == {"ev": "beat", "n": n}
        assert session.open(hello.session.seal({"op": "beat", "n": n})) == {"op": "beat", "n": n}


def test_an_agent_without_the_key_is_refused() -> None:
    key = os.urandom(wire.KEY_BYTES)
    orch, agent = asyncio.run(_pair(_orch(key), _agent(os.urandom(wire.KEY_BYTES))))
    # the agent checks the orchestrator's proof first: a wrong key stops it there
    assert isinstance(agent, wire.ChannelError)
    assert isinstance(orch, wire.ChannelError)


def test_an_orchestrator_without_the_key_drives_no_agent() -> None:
    key = os.urandom(wire.KEY_BYTES)
    _, agent = asyncio.run(_pair(_orch(os.urandom(wire.KEY_BYTES)), _agent(key)))
    assert isinstance(agent, wire.ChannelError)
    assert "did not prove" in str(agent)


def test_a_peer_that_replays_an_old_proof_is_refused() -> None:
    """An agent's proof is bound to both nonces: one recorded from an earlier connection
    does not open a new one."""
    key = os.urandom(wire.KEY_BYTES)
    recorded: list[bytes] = []

    def recorder(sock: socket.socket) -> Any:
        return wire.agent_handshake(wire.Lines(sock), key, "n1", 5.0)

    async def orch_recording(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> Any:
        hello_line = await r.readline()
        recorded.append(hello_line)
        # answer like an orchestrator would, then keep the agent's proof
        import orjson

        a = orjson.loads(hello_line)["nonce"]
        b = "00" * 16
        proof = wire._mac(key, "orchestrator", a, b, "n1").hex()
        w.write(orjson.dumps({"nonce": b, "proof": proof}) + b"\n")
        await w.drain()
        recorded.append(await r.readline())
        return None

    asyncio.run(_pair(orch_recording, recorder))

    def replay(sock: socket.socket) -> Any:
        sock.sendall(recorded[0])
        lines = wire.Lines(sock)
        lines.readline(
            5.0, wire.MAX_HELLO
        )  # a fresh nonce and proof: not answerable without the key
        sock.sendall(recorded[1])
        return sock.recv(1 << 16)

    orch, _ = asyncio.run(_pair(_orch(key), replay))
    assert isinstance(orch, wire.ChannelError)


def _sessions() -> tuple[wire.Session, wire.Session]:
    key = os.urandom(wire.KEY_BYTES)
    return (
        wire._session(key, "a", "b", "n1", b"o", b"a"),
        wire._session(key, "a", "b", "n1", b"a", b"o"),
    )


def test_changed_replayed_reordered_and_reflected_frames_fail() -> None:
    orch, agent = _sessions()
    first = orch.seal({"op": "launch", "lid": 1})
    changed = first.replace(b'"lid":1', b'"lid":2')
    with pytest.raises(wire.ChannelError):
        agent.open(changed)
    orch2, agent2 = _sessions()
    orch2.seal({"op": "launch", "lid": 1})
    second = orch2.seal({"op": "signal", "sig": "KILL"})
    with pytest.raises(wire.ChannelError):  # the second frame before the first
        agent2.open(second)
    orch3, agent3 = _sessions()
    one = orch3.seal({"op": "x"})
    assert agent3.open(one) == {"op": "x"}
    with pytest.raises(wire.ChannelError):  # the same frame again
        agent3.open(one)
    orch4, _ = _sessions()
    with pytest.raises(wire.ChannelError):  # its own frame sent back to the orchestrator
        orch4.open(orch4.seal({"ev": "exited", "lid": 1, "code": 0}))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_open_to_an_object_or_a_channel_error(line: bytes) -> None:
    _, agent = _sessions()
    try:
        message = agent.open(line)
    except wire.ChannelError:
        return
    assert isinstance(message, dict)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=8),
        st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=8),
        max_size=5,
    )
)
def test_what_is_sealed_opens_unchanged(message: dict[str, Any]) -> None:
    orch, agent = _sessions()
    assert agent.open(orch.seal(message)) == message


#: what a frame may carry: JSON's values, nested (NaN aside: it is not equal to itself)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=6))
def test_the_channels_json_is_the_standard_librarys(doc: dict[str, Any]) -> None:
    """The channel encodes and decodes with ``_json`` itself (json's Python layer loads
    ``re``, milliseconds of every agent's start): the bytes are json.dumps's, what is read
    is json.loads's, so either side may be of either kind."""
    import json

    data = wire._dumps(doc)
    assert data == json.dumps(doc, separators=(",", ":")).encode()
    assert wire._loads(data) == json.loads(data) == doc
    spaced = json.dumps(doc, indent=1, ensure_ascii=False).encode()
    assert wire._loads(b" \n" + spaced + b"\r\n") == doc


def test_the_channels_json_reads_what_json_reads_and_refuses_what_it_refuses() -> None:
    import json
    import math

    assert math.isnan(wire._loads(b'{"x":NaN}')["x"])
    assert wire._loads(b"[Infinity,-Infinity,1e400]") == [math.inf, -math.inf, math.inf]
    assert wire._dumps({"x": math.inf}) == json.dumps({"x": math.inf}).replace(" ", "").encode()
    assert wire._loads('{"é":"\\ud83d\\ude00"}'.encode()) == {"é": "\U0001f600"}
    assert wire._loads("{}".encode("utf-16")) == {}  # json.loads detects UTF-16
    for bad in (b"", b"{", b'{"a" 1}', b"[1,]", b"nul", b'"\x01"', b"{} {}", b"\xff", b"01"):
        with pytest.raises(ValueError):
            wire._loads(bad)
        with pytest.raises(ValueError):
            json.loads(bad)
    with pytest.raises(ValueError, match="nested too deeply"):
        wire._loads(b"[" * 100_000)
    with pytest.raises(TypeError, match="not JSON serializable"):
        wire._dumps({"x": object()})
    looped: dict[str, Any] = {}
    looped["me"] = looped
    with pytest.raises(ValueError, match="Circular"):
        wire._dumps(looped)


def test_the_agents_entry_imports_neither_ssl_psutil_nor_orjson() -> None:
    """Every node runs one agent and its start-up CPU is on the launch's critical path:
    what it does not use stays unimported (a regression here costs every node)."""
    import subprocess
    import sys

    probe = (
        "import runpy, sys; sys.argv = ['agent', '--help'];\n"
        "try:\n    runpy.run_module('srt_services.launch.agent', run_name='not_main')\n"
        "except SystemExit:\n    pass\n"
        "import srt_services.launch.agent.node, srt_services.launch.agent.serve\n"
        "print(sorted(m for m in ('ssl', 'psutil', 'orjson') if sys.modules.get(m)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_the_agents_first_part_launches_without_asyncio_or_the_local_launcher(
    tmp_path: Path,
) -> None:
    """The agent's first part (hello, setup, cgroup, launches) runs as the agents' step
    starts it (``python -S``, no ``site``) on what the interpreter loads by itself and C
    modules: asyncio, the local launcher, the plan's dataclasses, typing, argparse,
    hashlib's OpenSSL, the idna codec, and signal, socket, json, subprocess, ctypes,
    contextlib and threading with what they load (enum, re, collections, functools,
    selectors, locale, struct, warnings) are each milliseconds of CPU on every node before its
    instances can start; they are loaded once the launches are done. The probe does what
    the first part does (the subreaper, the node's address, a frame each way, the cgroup
    module, an instance started) and lists what got loaded."""
    import subprocess
    import sys

    from srt_services.launch.slurm.agents_step import agent_command

    command = agent_command(sys.executable)
    assert command[1:3] == ["-S", "-c"], command
    boot = command[3].replace(
        "import run; run()", "import Start, parse, _connect, become_subreaper, node_address, spawn"
    )
    log = tmp_path / "instance.out"
    used = (
        "import os, srt_services.launch.cgroup, srt_services.procfs\n"
        "from srt_services.launch.agent import job_vars, wire\n"
        "assert become_subreaper()\n"
        "assert node_address(None)\n"
        "key = os.urandom(wire.KEY_BYTES)\n"
        "o = wire._session(key, 'a', 'b', 'n', b'o', b'a')\n"
        "a = wire._session(key, 'a', 'b', 'n', b'a', b'o')\n"
        "assert a.open(o.seal({'op': 'launch', 'env': job_vars()})) is not None\n"
        "assert o.open(a.seal({'ev': 'beat'})) == {'ev': 'beat'}\n"
        f"fd = os.open({str(log)!r}, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)\n"
        "pid = spawn(['echo', 'ran'], os.environ, [(os.POSIX_SPAWN_DUP2, fd, 1)])\n"
        "srt_services.procfs.start_ticks(pid)\n"
        "assert os.waitpid(pid, 0)[1] == 0\n"
    )
    unwanted = (
        "asyncio",
        "typing",
        "dataclasses",
        "argparse",
        "_hashlib",
        "hashlib",
        "secrets",
        "encodings.idna",
        "site",
        "signal",
        "socket",
        "json",
        "re",
        "enum",
        "subprocess",
        "ctypes",
        "struct",
        "contextlib",
        "threading",
        "collections",
        "functools",
        "selectors",
        "locale",
        "warnings",
        "srt_services.launch.local",
        "srt_services.launch.process",
        "srt_services.contracts.plan",
        "srt_services.launch.agent.node",
    )
    probe = f"{boot}\n{used}print(sorted(m for m in {unwanted!r} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
    assert log.read_text() == "ran\n"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=100), st.binary(max_size=300))
def test_the_channels_hmac_is_the_standard_one(key: bytes, message: bytes) -> None:
    """The agent computes HMAC-SHA256 itself (without loading libcrypto): the digests
    are the standard library's, for keys shorter and longer than a block."""
    import hashlib
    import hmac

    assert wire.Hmac(key).digest(message) == hmac.new(key, message, hashlib.sha256).digest()
    orch, _ = _sessions()
    sealed = orch.seal({"op": "beat"})
    mac, _, body = sealed.rstrip(b"\n").partition(b" ")
    want = hmac.new(orch.key, b"o" + (0).to_bytes(8, "big") + body, hashlib.sha256).hexdigest()
    assert mac == want[:32].encode()
