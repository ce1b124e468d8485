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

Nothing a client does can take the orchestrator down or starve it: at most
:data:`MAX_CLIENTS` connections are served at once (one more is told so and closed at
once, so a flood of connections costs a descriptor for an instant, never the descriptors
the job's launches need); a request is read within :data:`REQUEST_TIMEOUT` and is at most
:data:`~srt_services.jobdir.control.MAX_REQUEST` bytes, parsed without recursion; a client
that does not read its answer is dropped after :data:`SEND_TIMEOUT`; and whatever goes
wrong while serving one (an error of srt's own included) is answered to that client and
recorded as a ``control_error`` event, never raised into the loop.
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
    MAX_REQUEST,
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
REQUEST_TIMEOUT = 5.0
#: How long a client may leave an answer (or a progress note) unread before it is dropped.
SEND_TIMEOUT = 10.0
#: Connections served at once; one more is refused at once (see the module docstring).
MAX_CLIENTS = 16
#: Pause after ``accept`` failed for want of descriptors (the job's own use, not ours).
ACCEPT_BACKOFF = 0.1

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
        self._sock: socket.socket | None = None
        self._private_dir: str | None = None
        self._bound = False
        self._tasks: set[asyncio.Task[Any]] = set()
        #: connections being served now
        self.clients = 0

    # ------------------------------------------------------------------ lifetime

    def open(self) -> bool:
        """Bind the socket and start serving; False (and an event saying why) if it cannot."""
        try:
            sock = self._bind()
        except OSError as exc:
            self.emit("control_unavailable", detail=f"cannot bind a control socket: {exc}")
            return False
        self._bound = True
        self._sock = sock
        self._keep(asyncio.ensure_future(self._accept_loop(sock)))
        return True

    def _keep(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

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

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    await asyncio.sleep(ACCEPT_BACKOFF)
                continue
            if self.clients >= MAX_CLIENTS:
                self._turn_away(conn)
                continue
            self.clients += 1
            self._keep(asyncio.ensure_future(self._client(conn)))

    def _turn_away(self, conn: socket.socket) -> None:
        """One connection too many: say so (a fresh socket's buffer takes it) and close."""
        with contextlib.suppress(OSError), conn:
            conn.setblocking(False)
            text = f"busy: {self.clients} connections are being served; ask again in a moment"
            conn.send(encode(Reply(False, text, refused=True, busy=True).as_json()))

    def close(self) -> None:
        """Stop serving and remove the socket (pending requests are cancelled)."""
        for task in list(self._tasks):
            task.cancel()
        if self._sock is not None:
            self._sock.close()
        if self._bound:  # never what was there instead of a socket
            with contextlib.suppress(OSError):
                os.unlink(self.job.control_socket)
        if self._private_dir is not None:
            shutil.rmtree(self._private_dir, ignore_errors=True)

    # ------------------------------------------------------------------ one client

    async def _client(self, conn: socket.socket) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_unix_connection(sock=conn, limit=MAX_REQUEST)
            await self._answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError):
            pass  # the client went away, or did not read or write in time
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours: that client is told, the job goes on
            self._failed(writer, exc)
        finally:
            self.clients -= 1
            if writer is not None:
                writer.close()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.wait_closed(), SEND_TIMEOUT)
            else:
                conn.close()

    def _failed(self, writer: asyncio.StreamWriter | None, exc: BaseException) -> None:
        detail = f"{type(exc).__name__}: {str(exc)[:500]}"
        with contextlib.suppress(Exception):
            self.emit("control_error", detail=detail)
        if writer is not None and not writer.is_closing():
            with contextlib.suppress(Exception):
                writer.write(encode(Reply(False, f"internal error: {detail}").as_json()))

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
        except ValueError:  # the stream's limit: no newline within MAX_REQUEST bytes
            line = b"x" * (MAX_REQUEST + 1)
        try:
            request = Request.parse(line)
        except ValueError as exc:
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
            # notes come before the answer: once it was sent (--no-wait), nobody listens
            if request.wait and not writer.is_closing():
                writer.write(encode({"note": text}))

        task = asyncio.ensure_future(self._execute(prepared, note))
        self._keep(task)
        if not request.wait:
            await _send(
                writer,
                Reply(True, f"{request.op} of {request.unit} started").as_json(),
            )
            return
        reply = await asyncio.shield(task)
        await _send(writer, reply.as_json())

    async def _execute(self, op: Operation, note: Callable[[str], None]) -> Reply:
        """Run an accepted operation; an error in it is answered and recorded, not raised."""
        try:
            return await self.execute(op, note)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {str(exc)[:500]}"
            self.emit("control_error", op=op.request.op, unit=op.unit.name, detail=detail)
            return Reply(False, f"internal error while doing it: {detail}")


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
    if writer.is_closing():  # the client went away (Ctrl-C): nobody to tell
        return
    writer.write(encode(message))
    await asyncio.wait_for(writer.drain(), SEND_TIMEOUT)


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
