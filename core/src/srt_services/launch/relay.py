"""The frontend's port on 127.0.0.1, relayed to its node's namespace.

In namespaces mode the frontend listens on its node's bridge address; users, scripts and
the docs reach it at ``127.0.0.1:PORT`` as in shared mode, so the orchestrator listens
there and copies bytes both ways. A relay in the orchestrator rather than iptables DNAT:
DNAT of locally generated traffic to 127.0.0.1 needs ``route_localnet`` on the machine,
rules in a table other tools (Docker, firewalld) also rewrite, and a removal that a
killed orchestrator never does; a listening socket of the orchestrator disappears with
it. The relay's cost (a copy through one process) is nothing next to an inference request.
"""

from __future__ import annotations

import asyncio
import contextlib

#: What one read moves at most.
CHUNK = 256 * 1024


class Relay:
    """Listeners on 127.0.0.1 relaying to (address, port) targets."""

    def __init__(self) -> None:
        self._servers: list[asyncio.Server] = []
        self._pipes: set[asyncio.Task[None]] = set()

    async def add(self, port: int, address: str, target_port: int) -> None:
        """Listen on ``127.0.0.1:port``; raises ``OSError`` when it is taken."""

        async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            self._pipes.add(task)
            try:
                await _join(reader, writer, address, target_port)
            finally:
                self._pipes.discard(task)

        server = await asyncio.start_server(accepted, "127.0.0.1", port, reuse_address=True)
        self._servers.append(server)

    async def close(self) -> None:
        """Stop listening and cut every open connection."""
        for server in self._servers:
            server.close()
        for task in list(self._pipes):
            task.cancel()
        for task in list(self._pipes):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()


async def _join(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, address: str, port: int
) -> None:
    """Connect to the target and copy both ways until either side ends; a target that
    refuses (the frontend not up yet) closes the client's connection, as a closed port
    would refuse it."""
    try:
        up_reader, up_writer = await asyncio.open_connection(address, port)
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(_copy(reader, up_writer), _copy(up_reader, writer))
    finally:
        for w in (writer, up_writer):
            w.close()
            with contextlib.suppress(Exception):
                await w.wait_closed()


async def _copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(CHUNK):
            dst.write(data)
            await dst.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        # a half close: the other direction may still carry the answer
        with contextlib.suppress(OSError, RuntimeError):
            if dst.can_write_eof():
                dst.write_eof()
