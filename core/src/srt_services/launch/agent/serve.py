"""The node agent's second part: serving the orchestrator on an event loop, with the local
launcher's machinery (:mod:`.node`), from where the first part (:mod:`.__main__`) left off.

The first part hands over its connection (with the bytes it read but did not handle, and
the one message it opened but does not handle), the job's setup and cgroup, and the
instances it started; this part watches those instances as if it had started them, does
what the orchestrator asks until it says goodbye or is lost, and then stops everything of
the job on the node (see the package's ``__main__`` for the agent's life as a whole).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from srt_services.launch import process
from srt_services.launch.agent import wire
from srt_services.launch.children import ChildWatcher

if TYPE_CHECKING:
    from srt_services.launch.agent.handover import Launched
    from srt_services.launch.agent.node import NodeAgent
    from srt_services.launch.cgroup import JobCgroup

Note = Callable[[str], None]


class Start(Protocol):
    """What this part takes over from the first part (``__main__.Start``), named here
    so that this module need not import the first part back."""

    lines: wire.Lines
    session: wire.Session
    node: str
    job_dir: str
    setup: dict[str, Any]
    cgroup: JobCgroup | None
    launched: list[Launched]
    pending: dict[str, Any] | None
    lost: str | None
    left: float


class Lost(Exception):
    """The orchestrator is gone, or can no longer be trusted: stop everything."""


class Channel:
    """The agent's end of an authenticated connection."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, session: wire.Session
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.session = session
        self.closed = False

    def send(self, message: dict[str, Any]) -> None:
        if not self.closed and not self.writer.is_closing():
            self.writer.write(self.session.seal(message))

    async def receive(self, timeout: float) -> dict[str, Any]:
        try:
            async with asyncio.timeout(timeout):
                line = await self.reader.readline()
        except TimeoutError:
            raise Lost(f"no word from the orchestrator for {timeout:g}s") from None
        except (ValueError, asyncio.LimitOverrunError):
            raise Lost("a frame longer than the channel allows") from None
        except OSError as exc:
            raise Lost(f"connection error: {exc}") from None
        if not line:
            raise Lost("connection closed")
        try:
            return self.session.open(line)
        except wire.ChannelError as exc:
            raise Lost(str(exc)) from None

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(Exception):
            self.writer.close()


def serve(start: Start, note: Note) -> int:
    """Serve until the orchestrator says goodbye (0) or is lost (3, everything stopped)."""
    return asyncio.run(_serve_all(start, note))


async def _serve_all(start: Start, note: Note) -> int:
    loop = asyncio.get_running_loop()
    # the first part set it before its first launch; an agent that launched nothing yet
    # still keeps below it what its one-shot commands daemonize
    process.become_subreaper()
    watcher = ChildWatcher(loop)

    def on_signal(sig: signal.Signals) -> None:
        note(f"{sig.name}: the orchestrator stops the job's instances in order")

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal, sig)
    # the bytes the first part read but did not handle come first, then the socket's
    reader = asyncio.StreamReader(limit=wire.MAX_LINE)
    reader.feed_data(start.lines.buffer)
    protocol = asyncio.StreamReaderProtocol(reader)
    sock = start.lines.sock
    if not isinstance(sock, socket.socket):
        # the first part connects with the bare ``_socket`` type (the socket module, with
        # the enum and selectors modules it loads, cost every agent ~5-8 ms before its first
        # launch): the same connection, in the type asyncio expects
        sock = socket.socket(fileno=sock.detach())
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, sock=sock)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    channel = Channel(reader, writer, start.session)
    try:
        return await _run(channel, start, watcher, note)
    finally:
        channel.close()
        watcher.close()


async def _run(channel: Channel, start: Start, watcher: ChildWatcher, note: Note) -> int:
    from srt_services.launch.agent.node import NodeAgent

    setup = start.setup
    agent = NodeAgent(start.node, start.job_dir, setup, watcher, channel.send, note, start.cgroup)
    try:
        for one in start.launched:
            agent.adopt(one)
        watcher.reap()  # an instance that exited before the watcher was there
        note(f"loaded; supervising {len(start.launched)} instance(s) it started")
        beats = asyncio.ensure_future(_beat(channel, float(setup.get("heartbeat", 1.0))))
        try:
            why = start.lost
            if why is None and start.pending is not None:
                why = await _do(channel, agent, start.pending, note)
            if why is None:
                lost_after = float(setup.get("lost_after", 10.0))
                why = await _serve(channel, agent, lost_after, start.left, note)
        finally:
            beats.cancel()
        if why == "":
            note("the orchestrator is done; exiting")
            return 0
        await agent.stop_all(why, noted=start.lost is not None)
        return 3
    finally:
        agent.close()


async def _beat(channel: Channel, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        channel.send({"ev": "beat"})


async def _serve(
    channel: Channel, agent: NodeAgent, lost_after: float, left: float, note: Note
) -> str:
    """Do what the orchestrator asks until it says goodbye (``""``) or is lost (why);
    the first word must come within ``left`` seconds (the first part heard the last)."""
    timeout = max(left, 0.0)
    while True:
        try:
            m = await channel.receive(timeout)
        except Lost as exc:
            why = str(exc)
            if timeout != lost_after and why.startswith("no word"):
                why = f"no word from the orchestrator for {lost_after:g}s"
            return why
        timeout = lost_after
        done = await _do(channel, agent, m, note)
        if done is not None:
            return done


async def _do(channel: Channel, agent: NodeAgent, m: dict[str, Any], note: Note) -> str | None:
    """One request; ``""`` for goodbye, else ``None``."""
    op = m.get("op")
    try:
        if op == "launch":
            agent.launch(m)
        elif op == "signal":
            await agent.signal(m)
        elif op == "sweep":
            agent.sweep(m)
        elif op == "call":
            agent.call(m)
        elif op == "cancel":
            agent.cancel(m)
        elif op == "bye":
            return ""
        # "load" (the launches are done for now) matters only to the first part
    except (KeyError, TypeError, ValueError) as exc:
        # an authentic request this agent cannot read: a bug, said out loud
        note(f"cannot do {op!r}: {type(exc).__name__}: {exc}")
        channel.send({"ev": "error", "op": op, "error": f"{type(exc).__name__}: {exc}"})
    return None
