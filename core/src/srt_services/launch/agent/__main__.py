"""``python -m srt_services.launch.agent``: the srt node agent of one Slurm node.

One ``srun`` step across the allocation starts one agent per node. Each connects to the
orchestrator (the address is on its command line), proves it holds the job's agent key
and is told the job's cookie; from then on it launches, signals and sweeps its node's
instances as it is asked, and reports their exits, their PIDs and what its node sees of
their readiness (:mod:`.wire` is the channel, :mod:`.node` the work).

Its own life is bounded by the orchestrator's. When the connection ends (the orchestrator
died: the kernel closed its socket), breaks (a frame fails its check) or falls silent for
``lost_after`` seconds (the batch node hangs or vanished: a heartbeat flows both ways every
``heartbeat`` seconds), the agent stops every instance of its node itself, the stop signal
first and SIGKILL after the grace, removes the node-local tree, and exits. SIGTERM from
Slurm (the job is cancelled) reaches the orchestrator too, which stops the job in order
through the agents: an agent only notes it.
"""

from __future__ import annotations

import sys

# Every node starts one agent, and on a node that starts many (or on a test cluster whose
# "nodes" share a few cores) its start-up CPU is the launch's critical path. asyncio
# imports ``ssl`` only to offer TLS transports, which the agent never opens; refusing it
# here (asyncio takes the ImportError as "no TLS") saves each agent about a tenth of its
# import time. Nothing else of the agent's path imports what it does not use (psutil and
# orjson were kept off it too: ``python -X importtime -m srt_services.launch.agent``).
sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from srt_services.launch import process  # noqa: E402
from srt_services.launch.agent import wire  # noqa: E402
from srt_services.launch.children import ChildWatcher  # noqa: E402

#: How long the agent tries to reach the orchestrator before it gives up.
CONNECT_FOR = 20.0
#: Defaults until the orchestrator's setup says otherwise.
HEARTBEAT = 1.0
LOST_AFTER = 10.0


#: Where :func:`note` writes (``--log-dir``: the agent's own file), else standard output.
_log_fd: int | None = None


def note(text: str) -> None:
    """A line in the agent's log (``logs/srt-agent-<node>.out``).

    Under Slurm the agent appends it to that file itself rather than printing it for its
    srun client to forward: when the job ends because its orchestrator died, Slurm ends
    that client too, and the agent's last words (what it stopped, what is left) were lost
    on the way whenever it outlived the client by a moment."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    line = f"{stamp} srt-agent[{os.getpid()}]: {text}\n"
    if _log_fd is not None:
        with contextlib.suppress(OSError):
            os.write(_log_fd, line.encode())
            return
    sys.stdout.write(line)
    sys.stdout.flush()


def _open_log(log_dir: str, node: str) -> None:
    global _log_fd
    with contextlib.suppress(OSError):
        path = os.path.join(log_dir, f"srt-agent-{node}.out")
        _log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)


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


def node_address(interface: str | None) -> str:
    """What this node says its address is, as text the orchestrator picks an IPv4 address
    from: the same probe the allocation's own lookup step runs on every node
    (``hostname -I``, or the site's interface), so both ways give the same address."""
    import subprocess

    argv = ["ip", "-4", "-o", "addr", "show", "dev", interface] if interface else ["hostname", "-I"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"({argv[0]} failed: {exc})"
    return done.stdout


async def connect(
    host: str, port: int, key: bytes, node: str, address: str | None = None
) -> Channel:
    deadline = time.monotonic() + CONNECT_FOR
    delay = 0.05
    while True:
        try:
            reader, writer = await asyncio.open_connection(host, port, limit=wire.MAX_LINE)
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                why = f"cannot reach the orchestrator at {host}:{port}: {exc}"
                raise wire.ChannelError(why) from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
    with contextlib.suppress(OSError):
        writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    session = await wire.agent_handshake(reader, writer, key, node, address=address)
    return Channel(reader, writer, session)


async def serve(
    host: str,
    port: int,
    key_file: str,
    node: str,
    job_dir: str,
    address: str | None = None,
    setup_within: float = LOST_AFTER,
) -> int:
    """Connect, serve the orchestrator until it says goodbye or is lost; the exit code.

    An agent started with the allocation (``address``: its node's address, reported in
    its hello) connects before the orchestrator has planned the job: its setup may come
    ``setup_within`` seconds later."""
    loop = asyncio.get_running_loop()
    process.become_subreaper()
    watcher = ChildWatcher(loop)
    main = asyncio.current_task()
    serving = False

    def on_signal(sig: signal.Signals) -> None:
        if serving:
            note(f"{sig.name}: the orchestrator stops the job's instances in order")
        elif main is not None:
            main.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        loop.add_signal_handler(sig, on_signal, sig)
    channel: Channel | None = None
    try:
        channel = await connect(host, port, wire.read_key(key_file), node, address)
        setup = await channel.receive(setup_within)
        if setup.get("op") != "setup" or not isinstance(setup.get("cookie"), str):
            raise wire.ChannelError("the orchestrator's first message is not the setup")
        serving = True
        return await _run(channel, setup, node, job_dir, watcher)
    except wire.ChannelError as exc:
        note(f"cannot serve: {exc}")
        return 2
    except Lost as exc:
        note(f"orchestrator lost before the job started ({exc})")
        return 3
    finally:
        if channel is not None:
            channel.close()
        watcher.close()


async def _run(
    channel: Channel, setup: dict[str, Any], node: str, job_dir: str, watcher: ChildWatcher
) -> int:
    from srt_services.launch.agent.node import NodeAgent

    agent = NodeAgent(node, job_dir, setup, watcher, channel.send, note)
    try:
        channel.send({"ev": "ready", **(await agent.prepare())})
        note(f"serving {node} for job {setup.get('job_id', '?')}")
        beats = asyncio.ensure_future(_beat(channel, float(setup.get("heartbeat", HEARTBEAT))))
        try:
            why = await _serve(channel, agent, float(setup.get("lost_after", LOST_AFTER)))
        finally:
            beats.cancel()
        if why is None:
            note("the orchestrator is done; exiting")
            return 0
        await agent.stop_all(why)
        return 3
    finally:
        agent.close()


async def _beat(channel: Channel, every: float) -> None:
    while True:
        await asyncio.sleep(every)
        channel.send({"ev": "beat"})


async def _serve(channel: Channel, agent: Any, lost_after: float) -> str | None:
    """Do what the orchestrator asks until it says goodbye (``None``) or is lost (why)."""
    while True:
        try:
            m = await channel.receive(lost_after)
        except Lost as exc:
            return str(exc)
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
                return None
        except (KeyError, TypeError, ValueError) as exc:
            # an authentic request this agent cannot read: a bug, said out loud
            note(f"cannot do {op!r}: {type(exc).__name__}: {exc}")
            channel.send({"ev": "error", "op": op, "error": f"{type(exc).__name__}: {exc}"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srt_services.launch.agent")
    parser.add_argument("--connect", required=True, help="HOST:PORT of the orchestrator")
    parser.add_argument("--key-file", required=True, help="the job's agent key")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--node", help="this node's name (default: $SLURMD_NODENAME)")
    parser.add_argument(
        "--report-address",
        action="store_true",
        help="say this node's address in the hello (the allocation asks it of the agents)",
    )
    parser.add_argument("--interface", help="with --report-address: this interface's address")
    parser.add_argument("--log-dir", help="append the agent's notes to srt-agent-NODE.out here")
    parser.add_argument(
        "--setup-within",
        type=float,
        default=LOST_AFTER,
        help="how long the orchestrator may take to send the setup after the hello",
    )
    args = parser.parse_args(argv)
    host, _, port = args.connect.rpartition(":")
    node = args.node or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if args.log_dir:
        _open_log(args.log_dir, node)
    address = node_address(args.interface) if args.report_address else None
    try:
        return asyncio.run(
            serve(
                host.strip("[]"),
                int(port),
                args.key_file,
                node,
                args.job_dir,
                address,
                args.setup_within,
            )
        )
    except asyncio.CancelledError:
        note("stopped before it could serve")
        return 2


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: by now every instance of the
    node is gone and every message is sent, and 64 agents tearing down their interpreters
    at once (tens of ms of CPU each) were most of the wait for the agents' step to end."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
