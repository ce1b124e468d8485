"""The orchestrator's end of the control socket (the wire format and the client are in
:mod:`srt_services.jobdir.control`).

The socket is bound in the job directory with mode 0600 (set on the socket before it is
bound, so it is never reachable by others, not even for an instant), and every connection
is checked with ``SO_PEERCRED``: only the job's own user is served. Root passes the file
mode but not that check.

Where the job directory cannot hold a socket (some network and FUSE filesystems refuse
``bind``), the socket goes to a private directory on this host and the job directory gets a
symbolic link to it; if even that fails the job runs without one and says why in
``events.jsonl`` (``control_unavailable``).

A request runs as a task of its own: a client that goes away (Ctrl-C) does not cancel a
restart half-way; it just stops hearing about it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

from srt_services.jobdir.control import (
    MAX_LINE,
    Peer,
    Reply,
    Request,
    encode,
    peer_of,
    short_address,
)
from srt_services.jobdir.layout import CONTROL_SOCKET, JobDir
from srt_services.supervise.runs import Emit
from srt_services.supervise.service_ops import Operation

#: How long a connected client may take to send its request.
REQUEST_TIMEOUT = 10.0

Prepare = Callable[[Request, Peer], Operation | Reply]
Execute = Callable[[Operation, Callable[[str], None]], Awaitable[Reply]]


class ControlServer:
    def __init__(
        self, job: JobDir, prepare: Prepare, execute: Execute, emit: Emit, describe: str
    ) -> None:
        self.job = job
        self.prepare = prepare
        self.execute = execute
        self.emit = emit
        #: the ``hello`` answer
        self.describe = describe
        self._server: asyncio.AbstractServer | None = None
        self._private_dir: str | None = None
        self._bound = False
        self._tasks: set[asyncio.Task[Any]] = set()

    # ------------------------------------------------------------------ lifetime

    def open(self) -> bool:
        """Bind the socket and start serving; False (and an event saying why) if it cannot."""
        try:
            sock = self._bind()
        except OSError as exc:
            self.emit("control_unavailable", detail=f"cannot bind a control socket: {exc}")
            return False
        self._bound = True
        task = asyncio.ensure_future(self._serve(sock))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _bind(self) -> socket.socket:
        _remove_stale(self.job.control_socket)
        try:
            return _listen(self.job.path)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise
        # the job directory's filesystem holds no sockets: a private directory here, linked
        self._private_dir = tempfile.mkdtemp(prefix="srt-control-", dir=_runtime_dir())
        sock = _listen(self._private_dir)
        try:
            os.symlink(os.path.join(self._private_dir, CONTROL_SOCKET), self.job.control_socket)
        except OSError:
            sock.close()
            raise
        return sock

    async def _serve(self, sock: socket.socket) -> None:
        self._server = await asyncio.start_unix_server(self._client, sock=sock, limit=MAX_LINE)

    def close(self) -> None:
        """Stop serving and remove the socket (pending requests are cancelled)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._bound:  # never what was there instead of a socket
            with contextlib.suppress(OSError):
                os.unlink(self.job.control_socket)
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)

    # ------------------------------------------------------------------ one client

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await self._answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_of(writer.get_extra_info("socket"))
        if peer.uid != os.geteuid():
            why = f"uid {peer.uid} is not the job's user (uid {os.geteuid()})"
            self.emit(
                "control_refused",
                op="connection",
                unit=f"from pid {peer.pid}",
                uid=peer.uid,
                detail=why,
            )
            await _send(writer, Reply(False, why, refused=True).as_json())
            return
        try:
            line = await asyncio.wait_for(reader.readline(), REQUEST_TIMEOUT)
            request = Request.parse(line)
        except ValueError as exc:  # also a line over the limit
            await _send(writer, Reply(False, f"bad request: {exc}", refused=True).as_json())
            return
        if request.op == "hello":
            await _send(writer, Reply(True, self.describe).as_json())
            return
        prepared = self.prepare(request, peer)
        if isinstance(prepared, Reply):
            await _send(writer, prepared.as_json())
            return

        def note(text: str) -> None:
            if not writer.is_closing():
                writer.write(encode({"note": text}))

        task = asyncio.ensure_future(self.execute(prepared, note))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if not request.wait:
            await _send(
                writer,
                Reply(True, f"{request.op} of {request.unit} started").as_json(),
            )
            return
        reply = await asyncio.shield(task)
        await _send(writer, reply.as_json())


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    if writer.is_closing():  # the client went away (Ctrl-C): nobody to tell
        return
    writer.write(encode(message))
    await writer.drain()


#: what ``bind`` says on a filesystem that cannot hold a socket
_UNSUPPORTED = {errno.EACCES, errno.EPERM, errno.EOPNOTSUPP, errno.EINVAL}


def _listen(directory: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        # the mode a socket is bound with comes from its inode: 0600 before it exists
        os.fchmod(sock.fileno(), 0o600)
        with short_address(directory) as address:
            sock.bind(address)
        sock.listen(16)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _remove_stale(path: str) -> None:
    """A socket (or our link to one) left by an earlier run of this directory."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISSOCK(mode) or stat.S_ISLNK(mode):
        os.unlink(path)


def _runtime_dir() -> str | None:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return runtime if runtime and os.path.isdir(runtime) else None
