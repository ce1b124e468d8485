"""The running orchestrator's control socket, as both ends see it: where it is, what goes
over it, and the client that ``srt restart`` and ``srt stop JOBDIR SERVICE`` use.

The socket is ``<job dir>/control.sock``, an AF_UNIX stream socket of mode 0600 that the
orchestrator (:mod:`srt_services.supervise.control`) binds when the job starts and removes
when it ends. Both ends also check each other's credentials (``SO_PEERCRED``): the server
serves only the job's own user, the client talks only to a server of its own user (or
root). A request is one JSON line::

    {"op": "restart", "unit": "web", "force": false, "wait": true}

and the answer is zero or more ``{"note": "..."}`` lines (progress, for people) and one
final ``{"ok": true|false, "text": "...", "refused": true|false}``.

Socket addresses are limited to 107 bytes and job directories are not, so both ends name
the socket through a descriptor of the job directory (``/proc/self/fd/N/control.sock``),
which is short whatever the directory's path.

An AF_UNIX socket connects only on the machine (the kernel) that bound it. For a Slurm
job the orchestrator runs on the batch node: from a login node the socket file is visible
on the shared job directory but cannot be connected to, and the client says so (and how to
run the command on that node) instead of waiting.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shlex
import socket
import stat
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from srt_services.jobdir.layout import CONTROL_SOCKET, JobDirError
from srt_services.jobdir.view import JobView

#: The longest line either end accepts (a reply's note quotes a service's words).
MAX_LINE = 64 * 1024
#: The longest request line the orchestrator reads (a request is a few dozen bytes).
MAX_REQUEST = 4096
#: The longest unit name a request may carry (names are far shorter).
MAX_UNIT = 256
#: How long a client waits to be connected (a full backlog would otherwise block).
CONNECT_TIMEOUT = 5.0
OPS = ("hello", "restart", "stop")


class ControlError(JobDirError):
    """The orchestrator cannot be asked (or refused): the message says why and what to do."""


class ControlRefused(ControlError):
    """This user may not ask the orchestrator at all (another user's job)."""


@dataclass(frozen=True, slots=True)
class Peer:
    pid: int
    uid: int
    gid: int


def peer_of(sock: socket.socket) -> Peer:
    """The credentials of the process at the other end of ``sock`` (Linux SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", raw)
    return Peer(pid, uid, gid)


@contextlib.contextmanager
def short_address(directory: str) -> Iterator[str]:
    """The control socket's address through a descriptor of ``directory`` (any length)."""
    fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{CONTROL_SOCKET}"
    finally:
        os.close(fd)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True, slots=True)
class Request:
    op: str
    unit: str = ""
    force: bool = False
    wait: bool = True

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "unit": self.unit, "force": self.force, "wait": self.wait}

    @classmethod
    def parse(cls, line: bytes) -> Request:
        """A request line; ``ValueError`` naming what is wrong, whatever the line holds.

        orjson, not ``json``: it refuses nesting deeper than 1024 with an error instead of
        recursing until a ``RecursionError``; and no value of the line is ever shown by its
        ``repr`` (a nested one would recurse too), only scalars, cut short.
        """
        if len(line) > MAX_REQUEST:
            raise ValueError(f"the request is longer than {MAX_REQUEST} bytes")
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise ValueError("the request is not a JSON object") from None
        if not isinstance(data, dict):
            raise ValueError("the request is not a JSON object")
        op, unit = data.get("op"), data.get("unit", "")
        if not isinstance(op, str) or op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}, not {shown(op)}")
        if not isinstance(unit, str) or (op != "hello" and not unit):
            raise ValueError("unit must be a service name")
        if len(unit) > MAX_UNIT or "\0" in unit:
            raise ValueError(f"unit must be a service name (at most {MAX_UNIT} characters)")
        force, wait = data.get("force", False), data.get("wait", True)
        if not isinstance(force, bool) or not isinstance(wait, bool):
            raise ValueError("force and wait must be true or false")
        return cls(op, unit, force, wait)


def shown(value: Any) -> str:
    """A value of a request in a message: a short scalar as JSON would write it, anything
    else by its kind (never a ``repr`` that could recurse or run long)."""
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)[:40]
    if isinstance(value, str):
        text = json.dumps(value)
        return text if len(text) <= 40 else text[:36] + '..."'
    return "a list" if isinstance(value, list) else "an object"


@dataclass(frozen=True, slots=True)
class Reply:
    ok: bool
    text: str
    refused: bool = False
    #: refused because another operation on the same service is in progress (ask again
    #: once it is done): the request was not queued
    busy: bool = False

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": self.ok, "text": self.text, "refused": self.refused}
        if self.busy:
            out["busy"] = True
        return out


# --------------------------------------------------------------------------- the client


def ask(
    path: str, request: Request, command: str, on_note: Callable[[str], object] = print
) -> Reply:
    """Send ``request`` to the orchestrator of the job in ``path`` and wait for its answer.

    ``command`` is the command line the user typed (quoted into the advice for running it
    on another host). :class:`ControlError` when the orchestrator cannot be asked.
    """
    view = JobView.read(path)
    _check_running(view)
    sock = _connect(view, command)
    with sock:
        try:
            sock.sendall(encode(request.as_json()))
            sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before it read the request: the refusal is there to read
        sock.settimeout(None)  # a restart takes as long as its stop and readiness take
        with sock.makefile("rb") as reader:
            reply = _read_reply(reader, on_note)
    if reply is not None:
        return reply
    raise ControlError(
        f"the orchestrator of {view.job.path} closed the connection without an answer"
        " (did the job end meanwhile? `srt status` says)"
    )


def _read_reply(reader: BinaryIO, on_note: Callable[[str], object]) -> Reply | None:
    """The final answer after the notes (handed to ``on_note``); ``None`` if none came."""
    while True:
        line = reader.readline(MAX_LINE + 1)
        if not line:
            return None
        if len(line) > MAX_LINE:  # no line of ours: skip the rest of it
            while line and not line.endswith(b"\n"):
                line = reader.readline(MAX_LINE + 1)
            continue
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(message, dict):
            continue
        if "note" in message:
            note = message["note"]
            on_note(note if isinstance(note, str) else "(a note that is no text)")
            continue
        text = message.get("text", "")
        return Reply(
            message.get("ok") is True,
            text if isinstance(text, str) else "(an answer without text)",
            message.get("refused") is True,
            message.get("busy") is True,
        )


def _check_running(view: JobView) -> None:
    state = view.state
    if state is None:
        if view.slurm_job_id is not None:
            raise ControlError(
                f"Slurm job {view.slurm_job_id} has not started its orchestrator yet"
                " (pending?): nothing to ask"
            )
        raise ControlError(f"{view.job.path}: the job has not started")
    if view.result is not None or state.finished:
        status = view.result.status if view.result is not None else state.status
        raise ControlError(f"{view.job.path}: the job has ended ({status}); nothing runs")


def _connect(view: JobView, command: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        with short_address(view.job.path) as address:
            sock.connect(address)
    except TimeoutError:
        sock.close()
        raise ControlError(
            f"the orchestrator of {view.job.path} did not accept the connection within"
            f" {CONNECT_TIMEOUT:g}s"
        ) from None
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EACCES, errno.EPERM):
            raise ControlRefused(_not_yours(view)) from None
        raise ControlError(_unreachable(view, exc, command)) from None
    peer = peer_of(sock)
    if peer.uid not in (os.geteuid(), 0):
        sock.close()
        raise ControlError(
            f"{view.job.control_socket} is served by uid {peer.uid}, not by you (uid"
            f" {os.geteuid()}) or root: not talking to it"
        )
    return sock


def _not_yours(view: JobView) -> str:
    try:
        owner = f"uid {os.stat(view.job.path).st_uid}"
    except OSError:
        owner = "another user"
    return (
        f"{view.job.path} belongs to {owner}, and you are uid {os.geteuid()}: its control"
        " socket serves only the job's user"
    )


def _unreachable(view: JobView, exc: OSError, command: str) -> str:
    """Why the socket did not answer, and what to do about it."""
    assert view.state is not None
    orch = view.state.orchestrator
    here = socket.gethostname()
    if orch.host != here:
        text = (
            f"the orchestrator of this job runs on {orch.host} and this is {here}: its control"
            " socket is an AF_UNIX socket, which accepts connections only on the host that"
            f" made it ({exc.strerror})."
        )
        job_id = view.slurm_job_id
        if job_id is not None:
            srun = shlex.join(
                ["srun", f"--jobid={job_id}", "--overlap", "-N1", "-n1", f"--nodelist={orch.host}"]
            )
            text += f" Run it on that node: {srun} {command}"
        else:
            text += f" Run it on {orch.host}: {command}"
        return text
    why = orch.elsewhere()  # another PID namespace, a reboot since
    if why is not None:
        return f"the orchestrator of this job (pid {orch.pid}) cannot be reached from here: {why}"
    if not view.orchestrator_alive():
        return f"the orchestrator of this job (pid {orch.pid}) is not running"
    if exc.errno == errno.ENOENT or not _is_socket(view.job.control_socket):
        return (
            f"the orchestrator (pid {orch.pid}) has no control socket: it may predate srt"
            " restart, or could not make one (see control_unavailable in events.jsonl)"
        )
    return f"cannot connect to {view.job.control_socket}: {exc.strerror}"


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False
