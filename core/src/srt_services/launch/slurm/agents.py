"""The orchestrator's side of the node agents: one ``srun`` step that starts an agent on
every node, one authenticated connection per agent, and the attempts each agent runs.

The batch host keeps one ``srun`` client (two processes) for the whole allocation and
one TCP connection per node, instead of an ``srun`` client per instance: its memory grows
with the nodes, not with the instances, and slurmctld tracks one step instead of
thousands. The agents connect to a listening socket on the batch host's address (the
port the kernel picks; :mod:`srt_services.launch.agent.wire` says how both ends prove
they belong to the job).

An attempt an agent runs has no local process: its handle carries the launch id, its PID
on the node once the agent reports it, and its exit arrives as a message. A node whose
agent goes away (its connection ends, breaks, or stays silent past ``lost_after``) is a
lost node: every attempt on it is reported exited with code :data:`LOST_CODE` and the
handle's ``exit_reason`` says which node was lost and why, so a critical service there
fails the job naming the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from srt_services.contracts.handle import CommandResult, Handle
from srt_services.contracts.launcher import ChildWatch, LaunchFailed, LaunchNotices
from srt_services.contracts.plan import PlannedInstance
from srt_services.launch import process
from srt_services.launch.agent import wire
from srt_services.launch.slurm.agents_step import (
    AGENTS_STEP,
    KEY_FILE,
    LISTEN_FD_VAR,
    SRUN_VAR,
    FleetConfig,
    agents_argv,
)
from srt_services.launch.slurm.allocation import SlurmError

#: The exit code of an attempt whose node was lost (what ``ssh`` says for a lost peer).
LOST_CODE = 255
HEARTBEAT = 1.0
#: How long the agents may take to say goodbye (and their step to end) at the end.
BYE_WAIT = 5.0
#: A connection's handshake must be done within this.
HANDSHAKE_TIMEOUT = 10.0
#: How often the start looks at what srun said about the agents' tasks.
START_POLL = 0.25
#: Once no launch has gone out for this long, the agents that launched something are told
#: to load the rest of their machinery (an agent starts on the little it needs to launch:
#: see the agent's ``__main__``). One quiet period for the whole job, not one per node: a
#: phase's units launch one after the other, and a node's launches are as far apart as
#: the other units' launches take.
LOAD_AFTER = 0.3
#: srun's line for a task that ended (``srun: error: n3: task 2: Exited with exit code 1``).
_TASK_ENDED = re.compile(r"error: (\S+): tasks? [\d,-]+: (?:Exited|Killed|Terminated)")


def _ended_tasks(log: str, offset: int) -> list[str]:
    """The nodes whose agent task srun reported ended (what it wrote to its output file
    from ``offset``, where this run's srun began)."""
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            text = fh.read(1 << 16).decode(errors="replace")
    except OSError:
        return []
    return list(_TASK_ENDED.findall(text))


class AgentError(SlurmError):
    """An agent could not do what it was asked, or its node is lost."""


@dataclass(eq=False, slots=True)
class Attempt:
    handle: Handle
    callback: Callable[[int], None] | None = None
    #: port -> whether the instance's own processes listen on it, as the agent saw
    owned: dict[int, bool | None] = field(default_factory=dict)


@dataclass(eq=False)
class Link:
    """One agent's connection and what runs through it."""

    node: str
    writer: asyncio.StreamWriter
    session: wire.Session
    pid: int
    last_heard: float
    cgroup: str | None = None
    ready: bool = False
    #: why the node is lost (``None`` while its agent answers)
    lost: str | None = None
    attempts: dict[int, Attempt] = field(default_factory=dict)
    calls: dict[int, asyncio.Future[Any]] = field(default_factory=dict)

    def send(self, message: dict[str, Any]) -> None:
        if self.lost is None and not self.writer.is_closing():
            self.writer.write(self.session.seal(message))


@dataclass(eq=False)
class Srun:
    """The agents' srun client: started here (its Popen), or by the batch script's first
    moments before this process exec'd (its PID only: still this process's child)."""

    pid: int
    log_offset: int
    popen: subprocess.Popen[bytes] | None = None
    code: int | None = None

    @classmethod
    def of(cls, spawned: process.Spawned) -> Srun:
        return cls(spawned.pid, spawned.log_offset, spawned.popen)

    def poll(self) -> int | None:
        """Its exit code once it ended (reaping it), else ``None``; only while no child
        watcher reaps this process's children."""
        if self.code is None:
            if self.popen is not None:
                self.code = self.popen.poll()
            else:
                with contextlib.suppress(ChildProcessError):
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                    if pid:
                        self.code = os.waitstatus_to_exitcode(status)
        return self.code

    def kill(self) -> None:
        if self.poll() is None:
            process.signal_pid(self.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                if self.popen is not None:
                    self.popen.wait(BYE_WAIT)
                else:
                    os.waitpid(self.pid, 0)


@dataclass(eq=False)
class EarlyAgents:
    """Agents started with the allocation, before the job is planned: the srun that runs
    them, each node's connection past its handshake, and what each node said its address
    is. :meth:`AgentFleet.start` takes them over (the setup goes out once the plan is
    made); nodes whose agent did not say hello are in ``failed`` (srun said their task
    ended) or missing."""

    key: bytes
    key_file: str
    srun: Srun
    log: str
    hellos: dict[str, tuple[socket.socket, wire.Hello]] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)

    def addresses(self) -> dict[str, str]:
        """node -> the text its agent reported its address in."""
        return {n: h.address or "" for n, (_, h) in self.hellos.items()}

    def close(self) -> None:
        """The plan starts nothing through agents after all: let them go (each sees its
        connection close and exits) and end their step."""
        for sock, _ in self.hellos.values():
            with contextlib.suppress(OSError):
                sock.close()
        self.hellos.clear()
        self.srun.kill()
        with contextlib.suppress(OSError):
            os.unlink(self.key_file)


def start_early(cfg: FleetConfig) -> EarlyAgents:
    """Start every node's agent now, with the allocation, and wait (up to
    ``start_timeout``) until each has said hello with its node's address: this replaces
    the separate step that asks every node its address, and the agents' start (a Python
    process per node) runs while the orchestrator plans. Runs before the orchestrator's
    event loop exists: a loop of its own, whose connections are handed over as sockets."""
    return asyncio.run(_start_early(cfg))


async def _start_early(cfg: FleetConfig) -> EarlyAgents:
    key_file = os.path.join(cfg.job_dir, KEY_FILE)
    log = os.path.join(cfg.job_dir, "logs", "srt-agents.out")
    started = _started_by_the_batch_script(key_file)
    if started is not None:
        listener, srun, key = started
    else:
        key = wire.write_key(key_file)
        listener = socket.create_server((cfg.bind, 0), backlog=max(128, len(cfg.nodes) + 16))
        os.makedirs(os.path.dirname(log), exist_ok=True)
        argv = agents_argv(cfg, listener.getsockname()[1], key_file, early=True)
        srun = Srun.of(process.spawn(argv, cfg.env, log, read_ticks=False))
    listener.setblocking(False)
    early = EarlyAgents(key, key_file, srun, log)
    hellos = _Hellos(cfg, early)
    acceptor = asyncio.ensure_future(hellos.accept(listener))
    try:
        await hellos.wait(cfg.start_timeout)
    finally:
        acceptor.cancel()
        await hellos.stop(acceptor)
        listener.close()
    return early


def _started_by_the_batch_script(key_file: str) -> tuple[socket.socket, Srun, bytes] | None:
    """The listening socket, srun and key of agents the batch script's first moments
    started (:mod:`.first`), handed down through the environment; ``None`` when it did not
    (or what it handed down is unusable: the agents are then started here)."""
    fd_text = os.environ.pop(LISTEN_FD_VAR, "")
    srun_text = os.environ.pop(SRUN_VAR, "")
    if not fd_text:
        return None
    try:
        listener = socket.socket(fileno=int(fd_text))
    except (ValueError, OSError):
        return None
    try:
        pid, _, offset = srun_text.partition(":")
        key = wire.read_key(key_file)
        os.set_inheritable(listener.fileno(), False)
        return listener, Srun(int(pid), int(offset)), key
    except (ValueError, OSError, wire.ChannelError):
        listener.close()
        return None


class _Hellos:
    """The early agents' handshakes, each in a task of its own (a peer that stalls its
    handshake delays no other)."""

    def __init__(self, cfg: FleetConfig, early: EarlyAgents) -> None:
        self.cfg = cfg
        self.early = early
        self.done = asyncio.Event()
        self.pending: set[asyncio.Task[None]] = set()

    async def accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            task = asyncio.ensure_future(self.handshake(conn))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def handshake(self, conn: socket.socket) -> None:
        early = self.early
        conn.setblocking(False)
        with contextlib.suppress(OSError):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader, writer = await asyncio.open_connection(sock=conn, limit=wire.MAX_LINE)
        keep = False
        try:
            hello = await wire.orchestrator_handshake(reader, writer, early.key, HANDSHAKE_TIMEOUT)
            if hello.node in self.cfg.nodes and hello.node not in early.hellos:
                # the connection outlives this loop: a duplicate of its descriptor (the
                # transport closes its own; the agent sends nothing until its setup)
                early.hellos[hello.node] = (socket.socket(fileno=os.dup(conn.fileno())), hello)
                keep = True
                if len(early.hellos) == len(self.cfg.nodes):
                    self.done.set()
        except (wire.ChannelError, OSError, asyncio.IncompleteReadError):
            pass  # not one of the job's agents (or a second one for a node): dropped
        finally:
            if keep:
                writer.transport.abort()
            else:
                writer.close()

    async def wait(self, timeout: float) -> None:
        """Until every node said hello, srun said a node's task ended, srun ended, or
        ``timeout``."""
        early = self.early
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not self.done.is_set() and loop.time() < deadline:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.done.wait(), min(START_POLL, deadline - loop.time()))
            ended = _ended_tasks(early.log, early.srun.log_offset)
            early.failed = [n for n in ended if n not in early.hellos]
            if early.failed or early.srun.poll() is not None:
                return

    async def stop(self, acceptor: asyncio.Task[None]) -> None:
        for task in list(self.pending):
            task.cancel()
        await asyncio.gather(acceptor, *self.pending, return_exceptions=True)


class AgentFleet:
    """Start the agents, talk to them, and end them."""

    def __init__(self, cfg: FleetConfig, children: ChildWatch, notices: LaunchNotices | None):
        self.cfg = cfg
        self.children = children
        self.notices = notices
        self.links: dict[str, Link] = {}
        #: nodes whose agent is ready and not lost
        self._ready_nodes: set[str] = set()
        self.key_file = os.path.join(cfg.job_dir, KEY_FILE)
        self._key = b""
        self._server: asyncio.AbstractServer | None = None
        self._srun: Srun | None = None
        self._srun_code: asyncio.Future[int] | None = None
        self._lids = itertools.count(1)
        self._ids = itertools.count(1)
        self._beats: asyncio.Task[None] | None = None
        self._connected: asyncio.Event | None = None
        self._accepting = True
        self._tasks: set[asyncio.Task[None]] = set()
        #: nodes that launched something since the agents were last told to load
        self._to_load: set[str] = set()
        self._load_timer: asyncio.TimerHandle | None = None
        self.survivors: list[str] = []
        #: attempts launched on a node that was already lost: reported at once
        self._gone: dict[int, Handle] = {}
        #: what each kind of agent message does (a heartbeat only counts as word)
        self._handlers: dict[str, Callable[[Link, dict[str, Any]], None]] = {
            "started": self._started,
            "exited": self._exited,
            "reply": self._reply,
            "file": self._file,
            "port": self._port,
            "ready": self._ready,
            "error": self._error,
        }

    # ------------------------------------------------------------------ start

    async def start(self, early: EarlyAgents | None = None) -> None:
        """Start every node's agent (or take over those ``early`` started with the
        allocation) and wait until each one is ready; LaunchFailed naming the nodes whose
        agent did not come up within ``start_timeout``."""
        cfg = self.cfg
        loop = asyncio.get_running_loop()
        self._connected = asyncio.Event()
        log = os.path.join(cfg.job_dir, "logs", "srt-agents.out")
        self._srun_code = loop.create_future()
        code = self._srun_code

        def srun_ended(c: int) -> None:
            if not code.done():
                code.set_result(c)

        failed: list[str] = []
        if early is None:
            self._key = wire.write_key(self.key_file)
            self._server = await asyncio.start_server(
                self._accept,
                host=cfg.bind,
                port=0,
                limit=wire.MAX_LINE,
                backlog=max(128, len(cfg.nodes) + 16),
            )
            port = self._server.sockets[0].getsockname()[1]
            argv = agents_argv(cfg, port, self.key_file)
            self._srun = Srun.of(process.spawn(argv, cfg.env, log, read_ticks=False))
            self.children.watch(self._srun.pid, srun_ended, self._srun.popen)
        else:
            self._key, self.key_file, self._srun = early.key, early.key_file, early.srun
            self._adopt_srun(early.srun, srun_ended)
            for sock, hello in early.hellos.values():
                reader, writer = await asyncio.open_connection(sock=sock, limit=wire.MAX_LINE)
                self._spawn(self._serve_link(hello, reader, writer))
            early.hellos.clear()
            failed = [n for n in early.failed if n not in self._ready_nodes]
        self._beats = asyncio.ensure_future(self._heartbeat())
        deadline = loop.time() + cfg.start_timeout
        while not failed and not self._all_ready() and loop.time() < deadline and not code.done():
            self._connected.clear()
            waits: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._connected.wait()), code}
            wait = min(deadline - loop.time(), START_POLL)
            await asyncio.wait(waits, timeout=wait, return_when="FIRST_COMPLETED")
            for w in waits:
                if w is not code and not w.done():
                    w.cancel()
            # srun says at once when a node's task ended before its agent came
            ended = _ended_tasks(log, self._srun.log_offset)
            failed = [n for n in ended if n not in self._ready_nodes]
            if failed:
                break
        self._accepting = False  # every agent came, or the job fails: no one else may
        if not self._all_ready():
            raise LaunchFailed(self._not_started(code, failed), node=self._missing_one(failed))

    def _adopt_srun(self, srun: Srun, ended: Callable[[int], None]) -> None:
        """Watch the early agents' srun from here on. It was started before this loop's
        child watcher existed: if it has ended meanwhile, its exit is known already (or was
        reaped as an orphan's: then only that it ended)."""
        if srun.code is None:
            try:
                os.waitid(os.P_PID, srun.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                srun.code = -1  # reaped without us: it ended, code unknown
            else:
                srun.poll()  # a zombie is reaped here; a live srun stays as it is
        if srun.code is not None:
            asyncio.get_running_loop().call_soon(ended, srun.code)
        else:
            self.children.watch(srun.pid, ended, srun.popen)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _all_ready(self) -> bool:
        return len(self._ready_nodes) == len(self.cfg.nodes)

    def _missing(self) -> list[str]:
        return [n for n in self.cfg.nodes if not ((k := self.links.get(n)) and k.ready)]

    def _missing_one(self, failed: list[str]) -> str | None:
        missing = failed or self._missing()
        return missing[0] if len(missing) == 1 else None

    def _not_started(self, code: asyncio.Future[int], failed: list[str]) -> str:
        missing = failed or self._missing()
        shown = ", ".join(missing[:8]) + (
            f" and {len(missing) - 8} more" if len(missing) > 8 else ""
        )
        if failed:
            why = "its task ended before the agent connected"
        elif code.done():
            why = f"the agents' srun step ended (exit {code.result()})"
        else:
            why = f"not within {self.cfg.start_timeout:g}s"
        said = []
        for node in missing[:3]:
            lines = process.tail(os.path.join(self.cfg.job_dir, "logs", f"srt-agent-{node}.out"), 3)
            if lines:
                said.append(f"{node}: {' / '.join(lines)}")
        srun_said = process.tail(os.path.join(self.cfg.job_dir, "logs", "srt-agents.out"), 3)
        if srun_said:
            said.append(" / ".join(srun_said))
        detail = f" ({'; '.join(said)})" if said else ""
        return f"the srt agent did not start on {shown}: {why}{detail}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            with contextlib.suppress(OSError):
                writer.get_extra_info("socket").setsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                )
            hello = await wire.orchestrator_handshake(reader, writer, self._key, HANDSHAKE_TIMEOUT)
        except (wire.ChannelError, OSError, asyncio.IncompleteReadError):
            with contextlib.suppress(Exception):
                writer.close()
            return  # a peer that is not one of the job's agents: nothing to say to it
        await self._serve_link(hello, reader, writer)

    async def _serve_link(
        self, hello: wire.Hello, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """One agent's connection past its handshake: its setup, then what it reports."""
        link = None
        try:
            if not self._accepting or hello.node not in self.cfg.nodes:
                raise wire.ChannelError(f"no agent expected for {hello.node!r}")
            old = self.links.get(hello.node)
            if old is not None and old.lost is None:
                raise wire.ChannelError(f"{hello.node} has an agent already")
            link = Link(hello.node, writer, hello.session, hello.pid, time.monotonic())
            self.links[hello.node] = link
            link.send(
                {
                    "op": "setup",
                    "cookie": self.cfg.cookie,
                    "job_id": self.cfg.job_id,
                    "job_name": self.cfg.job_name,
                    "local_dir": self.cfg.local_dir,
                    "heartbeat": HEARTBEAT,
                    "lost_after": self.cfg.lost_after,
                }
            )
            await self._read(link, reader)
        except wire.ChannelError:
            pass  # a peer that is not one of the job's agents: nothing to say to it
        except (OSError, asyncio.IncompleteReadError) as exc:
            if link is not None:
                self._lose(link, f"connection error: {exc}")
        finally:
            if link is not None:
                self._lose(link, "its connection closed (the agent died, or its node did)")
            with contextlib.suppress(Exception):
                writer.close()

    async def _read(self, link: Link, reader: asyncio.StreamReader) -> None:
        while link.lost is None:
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self._lose(link, "it sent a frame longer than the channel allows")
                return
            if not line:
                return
            try:
                message = link.session.open(line)
            except wire.ChannelError as exc:
                self._lose(link, f"its channel broke ({exc})")
                return
            link.last_heard = time.monotonic()
            self._on_message(link, message)

    def _on_message(self, link: Link, m: dict[str, Any]) -> None:
        handler = self._handlers.get(m.get("ev", ""))
        if handler is not None:
            handler(link, m)

    def _started(self, link: Link, m: dict[str, Any]) -> None:
        attempt = link.attempts.get(m.get("lid", -1))
        if attempt is not None:
            h = attempt.handle
            h.pid = h.pgid = int(m["pid"])
            h.start_ticks = m.get("ticks")
            if self.notices is not None:
                self.notices.state_changed()

    def _exited(self, link: Link, m: dict[str, Any]) -> None:
        attempt = link.attempts.pop(m.get("lid", -1), None)
        if attempt is not None:
            if m.get("error"):
                attempt.handle.exit_reason = f"cannot execute on {link.node}: {m['error']}"
            self._exit(attempt, int(m["code"]))

    def _reply(self, link: Link, m: dict[str, Any]) -> None:
        fut = link.calls.pop(m.get("id", -1), None)
        if fut is None or fut.done():
            return
        if m.get("ok"):
            fut.set_result(m.get("value"))
        else:
            fut.set_exception(AgentError(f"{link.node}: {m.get('error')}"))

    def _file(self, link: Link, m: dict[str, Any]) -> None:
        if self.notices is not None and isinstance(m.get("path"), str):
            self.notices.file_changed(m["path"])

    def _port(self, link: Link, m: dict[str, Any]) -> None:
        attempt = link.attempts.get(m.get("lid", -1))
        if attempt is not None:
            attempt.owned[int(m["port"])] = m.get("owned")

    def _ready(self, link: Link, m: dict[str, Any]) -> None:
        link.ready = True
        link.cgroup = m.get("cgroup")
        self._ready_nodes.add(link.node)
        if self._connected is not None:
            self._connected.set()

    def _error(self, link: Link, m: dict[str, Any]) -> None:
        """An agent could not read an authentic request: a bug in srt, failed loudly."""
        if self.notices is not None:
            error = AgentError(
                f"the agent on {link.node} could not do {m.get('op')!r}: {m.get('error')}"
            )
            self.notices.callback_failed(f"talking to the agent on {link.node}", error)

    def _exit(self, attempt: Attempt, code: int) -> None:
        callback = attempt.callback
        if callback is None:
            return
        attempt.callback = None
        try:
            callback(code)
        except Exception as exc:
            if self.notices is None:
                raise
            h = attempt.handle
            self.notices.callback_failed(f"handling the exit of {h.step} on {h.node}", exc)

    def _lose(self, link: Link, why: str) -> None:
        """The node's agent is gone: every attempt on it ends, its calls fail."""
        if link.lost is not None:
            return
        link.lost = why
        self._ready_nodes.discard(link.node)
        with contextlib.suppress(Exception):
            link.writer.close()
        for fut in link.calls.values():
            if not fut.done():
                fut.set_exception(AgentError(f"node {link.node} lost: {why}"))
        link.calls.clear()
        attempts = list(link.attempts.values())
        link.attempts.clear()
        for attempt in attempts:
            attempt.handle.exit_reason = f"node {link.node} lost: {why}"
            self._exit(attempt, LOST_CODE)
        if self._connected is not None:
            self._connected.set()

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT)
            now = time.monotonic()
            for link in list(self.links.values()):
                if link.lost is not None:
                    continue
                silent = now - link.last_heard
                if silent > self.cfg.lost_after:
                    self._lose(link, f"its agent has been silent for {silent:.0f}s")
                else:
                    link.send({"op": "beat"})

    # ------------------------------------------------------------------ attempts

    def launch(
        self,
        instance: PlannedInstance,
        env: dict[str, str],
        log_path: str,
        grace: float,
        follow: list[tuple[str, float | None]],
    ) -> Handle:
        lid = next(self._lids)
        fd, offset = process.open_log(log_path)
        os.close(fd)
        h = Handle(
            step=instance.step,
            unit=instance.unit,
            node=instance.node,
            pid=0,
            pgid=0,
            start_ticks=None,
            log_path=log_path,
            log_offset=offset,
            started_wall=time.time(),
            started_mono=time.monotonic(),
            extra={
                "via": "agent",
                "lid": lid,
                "job_id": self.cfg.job_id,
                "step_name": AGENTS_STEP,
                "stop_signal": instance.stop_signal,
            },
        )
        link = self.links.get(instance.node)
        if link is None or link.lost is not None:
            why = link.lost if link is not None else "it has no agent"
            h.exit_reason = f"node {instance.node} lost: {why}"
            self._gone[lid] = h
            return h
        link.attempts[lid] = Attempt(h)
        self._launched(instance.node)
        link.send(
            {
                "op": "launch",
                "lid": lid,
                "step": instance.step,
                "unit": instance.unit,
                "argv": instance.argv,
                "preamble": instance.preamble,
                "cwd": instance.cwd,
                "env": env,
                "log": log_path,
                "stop_signal": instance.stop_signal,
                "grace": grace,
                "ports": instance.ports,
                "follow": follow,
            }
        )
        return h

    def _launched(self, node: str) -> None:
        """(Re)start the quiet period after which the agents that launched load the rest."""
        self._to_load.add(node)
        if self._load_timer is not None:
            self._load_timer.cancel()
        self._load_timer = asyncio.get_running_loop().call_later(LOAD_AFTER, self._say_load)

    def _say_load(self) -> None:
        self._load_timer = None
        for node in sorted(self._to_load):
            link = self.links.get(node)
            if link is not None:
                link.send({"op": "load"})
        self._to_load.clear()

    def watch_exit(self, handle: Handle, callback: Callable[[int], None]) -> None:
        lid = handle.extra["lid"]
        if lid in self._gone:
            del self._gone[lid]
            asyncio.get_running_loop().call_soon(callback, LOST_CODE)
            return
        link = self.links.get(handle.node)
        attempt = link.attempts.get(lid) if link is not None else None
        if attempt is None:  # the node was lost between the launch and now
            handle.exit_reason = handle.exit_reason or f"node {handle.node} lost"
            asyncio.get_running_loop().call_soon(callback, LOST_CODE)
            return
        attempt.callback = callback

    def owns_listener(self, handle: Handle, port: int) -> bool | None:
        link = self.links.get(handle.node)
        attempt = link.attempts.get(handle.extra.get("lid", -1)) if link is not None else None
        return attempt.owned.get(port) if attempt is not None else None

    def signal(self, handles: Iterable[Handle], sig: str) -> None:
        """``sig`` (TERM: each attempt's own stop signal; KILL) to attempts and to what
        escaped their steps' process groups, one message per node."""
        by_node: dict[str, list[Handle]] = {}
        for h in handles:
            by_node.setdefault(h.node, []).append(h)
        for node, hs in by_node.items():
            link = self.links.get(node)
            if link is not None:
                link.send(
                    {
                        "op": "signal",
                        "sig": sig,
                        "lids": [h.extra["lid"] for h in hs],
                        "steps": sorted({h.step for h in hs}),
                    }
                )

    def sweep(self, steps: list[str] | None, step_nodes: Mapping[str, str]) -> None:
        """SIGKILL what is left of ``steps`` on their nodes (``None``: of the whole job,
        on every node), through each node's cgroup where it has one."""
        if steps is None:
            for link in self.links.values():
                link.send({"op": "sweep", "steps": None})
            return
        by_node: dict[str, list[str]] = {}
        for step in steps:
            node = step_nodes.get(step)
            for n in [node] if node is not None else list(self.links):
                by_node.setdefault(n, []).append(step)
        for node, chosen in by_node.items():
            target = self.links.get(node)
            if target is not None:
                target.send({"op": "sweep", "steps": chosen})

    # ------------------------------------------------------------------ requests

    def available(self, node: str) -> bool:
        link = self.links.get(node)
        return link is not None and link.ready and link.lost is None

    async def call(self, node: str, fn: str, args: dict[str, Any], timeout: float) -> Any:
        """Ask ``node``'s agent to do ``fn`` and wait for its answer, at most ``timeout``
        seconds; AgentError when it cannot (or its node is lost meanwhile)."""
        link = self.links.get(node)
        if link is None or link.lost is not None:
            why = link.lost if link is not None else "it has no agent"
            raise AgentError(f"node {node} lost: {why}")
        cid = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        link.calls[cid] = fut
        link.send({"op": "call", "id": cid, "fn": fn, "args": args})
        try:
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            link.send({"op": "cancel", "id": cid})
            raise AgentError(f"{node}: no answer to {fn} within {timeout:g}s") from None
        except asyncio.CancelledError:
            link.send({"op": "cancel", "id": cid})
            raise
        finally:
            link.calls.pop(cid, None)

    async def oneshot(
        self,
        node: str,
        argv: list[str],
        log_path: str,
        env: dict[str, str],
        timeout: float,
        cwd: str | None,
    ) -> CommandResult:
        args = {"argv": argv, "log": log_path, "env": env, "timeout": timeout, "cwd": cwd}
        try:
            got = await self.call(node, "oneshot", args, timeout + 30.0)
        except AgentError as exc:
            return CommandResult(1, "", str(exc))
        return CommandResult(int(got["code"]), got["stdout"], got["stderr"], bool(got["timed_out"]))

    # ------------------------------------------------------------------ the end

    async def finish(self, kill_wait: float) -> list[str]:
        """Every agent's last sweep (nothing of the job left on its node, the node-local
        tree removed), then goodbye; the agents' step ends. Returns what survived."""
        live = [n for n, link in self.links.items() if link.lost is None and link.ready]
        results = await asyncio.gather(
            *(self.call(n, "final", {}, kill_wait + 10.0) for n in live), return_exceptions=True
        )
        for node, result in zip(live, results, strict=True):
            if isinstance(result, BaseException):
                self.survivors.append(f"{node}: the agent's last sweep failed: {result}")
                continue
            self.survivors.extend(result.get("survivors", []))
            if result.get("local_dir_left"):
                self.survivors.append(f"{node}: {self.cfg.local_dir} could not be removed")
        for link in self.links.values():
            link.send({"op": "bye"})
            with contextlib.suppress(Exception):
                await asyncio.wait_for(link.writer.drain(), 1.0)
        await self._end_step(BYE_WAIT)
        return list(self.survivors)

    def lost_nodes(self) -> dict[str, str]:
        """node -> why, for every node whose agent is gone (or never came)."""
        out = {n: link.lost for n, link in self.links.items() if link.lost is not None}
        for n in self.cfg.nodes:
            if n not in self.links:
                out[n] = "its agent never started"
        return out

    async def _end_step(self, wait: float) -> None:
        """Wait for the agents' srun to end; SIGKILL it after ``wait`` (its agents are
        told to go, or gone)."""
        code = self._srun_code
        if code is None or self._srun is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(code), wait)
        if not code.done():
            process.signal_pid(self._srun.pid, signal.SIGKILL)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(code), wait)

    def close(self) -> None:
        self._accepting = False
        if self._beats is not None:
            self._beats.cancel()
        if self._load_timer is not None:
            self._load_timer.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._server is not None:
            self._server.close()
        for link in self.links.values():
            link.lost = link.lost or "the job ended"
            with contextlib.suppress(Exception):
                link.writer.close()
        if self._srun is not None and self._srun_code is not None and not self._srun_code.done():
            process.signal_pid(self._srun.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.unlink(self.key_file)
