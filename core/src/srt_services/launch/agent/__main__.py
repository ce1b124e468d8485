"""``python -m srt_services.launch.agent``: the srt node agent of one Slurm node.

One ``srun`` step across the allocation starts one agent per node. Each connects to the
orchestrator (the address is on its command line), proves it holds the job's agent key
and is told the job's cookie; from then on it launches, signals and sweeps its node's
instances as it is asked, and reports their exits, their PIDs and what its node sees of
their readiness (:mod:`.wire` is the channel, :mod:`.serve` the serving, :mod:`.node` the
work).

Its own life is bounded by the orchestrator's. When the connection ends (the orchestrator
died: the kernel closed its socket), breaks (a frame fails its check) or falls silent for
``lost_after`` seconds (the batch node hangs or vanished: a heartbeat flows both ways every
``heartbeat`` seconds), the agent stops every instance of its node itself, the stop signal
first and SIGKILL after the grace, removes the node-local tree, and exits. SIGTERM from
Slurm (the job is cancelled) reaches the orchestrator too, which stops the job in order
through the agents: an agent only notes it.

**Its start is in two parts.** Every node starts an agent, and where the nodes share a few
cores (a test cluster of network namespaces) or a node starts many, the agents' start-up
CPU is the launch's critical path. Nearly all of it was imports: asyncio and the local
launcher's machinery (~0.1 CPU-s), which the agent needs to supervise its instances, not to
start them. So this module does the first part on a blocking socket with the standard
library's cheapest modules: it connects, proves the key, says hello, takes its setup,
makes the job's cgroup, says it is ready, heartbeats, and launches what it is asked to
(the same way the local launcher does: a session of its own, the log appended, the cgroup
leaf). Only once the launches have stopped coming (:data:`SETTLE` of quiet), or at once
when anything else is asked of it, an instance exits, a launch has ports or files to
watch, or the orchestrator falls silent, does it load :mod:`.serve` (asyncio, the local
launcher) and hand over the connection, its unread bytes and the instances it started.
Nothing is lost meanwhile: a child that exits stays a zombie until it is reaped there, and
a followed file is reported once when its watch begins.
"""

from __future__ import annotations

# The first part imports only what the interpreter has loaded by itself and C modules:
# ``_signal`` not ``signal``, ``_socket`` not ``socket``, no contextlib, threading or
# subprocess until the launches are done (instances start with ``os.posix_spawn``). Those
# modules and what they load (enum, collections, functools, selectors, locale...), with
# json's re and ctypes, made this part's work up to its first launch cost 82 ms of CPU
# against 37 ms now and 20 ms for the bare interpreter (side by side, a loaded machine),
# on nodes that may share a few cores.
# A test keeps them out (core/tests/launch/test_agent_wire.py, the first part's imports).
import _socket
import os
import select
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal  # the same functions, on ints (typeshed has no stub of _signal)
    import subprocess
    from collections.abc import Mapping
    from typing import Any

    from srt_services.launch.cgroup import JobCgroup
else:
    import _signal

# asyncio (loaded once the launches are done) imports ``ssl`` only to offer TLS
# transports, which the agent never opens; refusing it here (asyncio takes the ImportError
# as "no TLS") saves each agent about a tenth of that import. Nothing else of the agent's
# path imports what it does not use (psutil and orjson were kept off it too).
sys.modules.setdefault("ssl", None)  # type: ignore[arg-type]

from srt_services.launch.agent import SETTLE_VAR, wire  # noqa: E402
from srt_services.launch.agent.handover import Launched  # noqa: E402

#: How long the agent tries to reach the orchestrator before it gives up.
CONNECT_FOR = 20.0
#: Defaults until the orchestrator's setup says otherwise.
HEARTBEAT = 1.0
LOST_AFTER = 10.0
#: After a launch, how long no other launch must come before the agent loads the rest of
#: its machinery, if the orchestrator has not said to (``load``: it says so once no launch
#: has gone out anywhere for a moment, so that each node's instances start before its
#: agent spends ~0.1 CPU-s on imports). ``SRT_AGENT_SETTLE`` changes it (the tests hold
#: an agent in its first part, or not, to check both).
SETTLE = 2.0
#: The interpreter's own thread switch interval (restored once the rest is loaded).
SWITCH_INTERVAL = sys.getswitchinterval()
#: The subreaper flag of ``prctl`` (what ``process.become_subreaper`` sets).
PR_SET_CHILD_SUBREAPER = 36
#: The signals the interpreter ignores, which a started program gets back at their
#: defaults (what subprocess's ``restore_signals`` does).
RESTORED_SIGNALS = (_signal.SIGPIPE, _signal.SIGXFSZ)
#: The names of the signals the agent notes.
SIGNAL_NAMES: dict[int, str] = {
    _signal.SIGTERM: "SIGTERM",
    _signal.SIGINT: "SIGINT",
    _signal.SIGHUP: "SIGHUP",
}

USAGE = """\
usage: python -m srt_services.launch.agent --connect HOST:PORT --key-file FILE --job-dir DIR
       [--node NODE] [--report-address] [--interface IFACE] [--log-dir DIR]
       [--setup-within SECONDS]

The srt node agent of one Slurm node (started by srt, one per node, in the job's
srt-agents step).

  --connect HOST:PORT      the orchestrator
  --key-file FILE          the job's agent key
  --job-dir DIR            the job directory
  --node NODE              this node's name (default: $SLURMD_NODENAME)
  --report-address         say this node's address in the hello (the allocation asks it
                           of the agents)
  --interface IFACE        with --report-address: this interface's address
  --log-dir DIR            append the agent's notes to srt-agent-NODE.out here
  --setup-within SECONDS   how long the orchestrator may take to send the setup after the
                           hello (default 10)
"""

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
        try:
            os.write(_log_fd, line.encode())
            return
        except OSError:
            pass
    sys.stdout.write(line)
    sys.stdout.flush()


def _open_log(log_dir: str, node: str) -> None:
    global _log_fd
    path = os.path.join(log_dir, f"srt-agent-{node}.out")
    try:
        _log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    except OSError:
        pass


class Usage(Exception):
    """The command line is wrong (exit 2, as argparse would)."""


class Stopped(Exception):
    """SIGTERM, SIGINT or SIGHUP before the agent serves: nothing to stop, it just ends."""


def parse(argv: list[str]) -> dict[str, Any]:
    """The options (by hand: argparse and the regular expressions it loads cost every
    node's agent ~10 ms of CPU, for eight options srt itself writes)."""
    opts: dict[str, Any] = {"report_address": False, "setup_within": LOST_AFTER}
    valued = {
        "--connect": "connect",
        "--key-file": "key_file",
        "--job-dir": "job_dir",
        "--node": "node",
        "--interface": "interface",
        "--log-dir": "log_dir",
        "--setup-within": "setup_within",
    }
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            raise SystemExit(0)
        if arg == "--report-address":
            opts["report_address"] = True
        elif name in valued:
            if not eq:
                if not args:
                    raise Usage(f"{name} needs a value")
                value = args.pop(0)
            opts[valued[name]] = value
        else:
            raise Usage(f"unknown argument {arg!r}")
    for need in ("--connect", "--key-file", "--job-dir"):
        if valued[need] not in opts:
            raise Usage(f"{need} is required")
    try:
        opts["setup_within"] = float(opts["setup_within"])
        host, _, port = opts["connect"].rpartition(":")
        opts["host"], opts["port"] = host.strip("[]"), int(port)
    except ValueError as exc:
        raise Usage(str(exc)) from None
    return opts


# ------------------------------------------------------------------ starting programs

_fds_closed_on_exec = False


def _close_inherited_on_exec() -> None:
    """Mark what the agent inherited (from srun) close-on-exec: what subprocess's
    ``close_fds`` did for every program it started. Whatever the interpreter opens is
    close-on-exec already (PEP 446), so once, before the first program, is enough."""
    global _fds_closed_on_exec
    if _fds_closed_on_exec:
        return
    _fds_closed_on_exec = True
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # pragma: no cover - no /proc: close them in every program instead
        return
    for name in names:
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:
                pass  # the listing's own descriptor, closed by now


def _executable(name: str, env: Mapping[str, str]) -> str:
    """``name`` as subprocess finds it: itself when it has a directory, else the first
    executable file of that name on the program's own PATH (``env``'s, not the agent's)."""
    if os.path.dirname(name):
        return name
    # os.get_exec_path(env), without the warnings module it loads
    path = env.get("PATH")
    for folder in (os.defpath if path is None else path).split(os.pathsep):
        path = os.path.join(folder, name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    raise FileNotFoundError(2, os.strerror(2), name)


def spawn(
    argv: list[str],
    env: Mapping[str, str],
    actions: list[tuple[Any, ...]],
    new_session: bool = True,
) -> int:
    """Start ``argv`` (a vfork and an exec: ``os.posix_spawn``), its standard streams set
    by ``actions``, in a session of its own unless told not to; its PID. OSError when it
    cannot start (the exec's own error), ValueError for an empty command.

    What ``subprocess.Popen(..., start_new_session=True, close_fds=True)`` does, without
    loading subprocess and all it imports before the agent's first launch: the program
    found as Popen finds it, the ignored signals restored, nothing inherited but its
    streams."""
    if not argv:
        raise ValueError("an empty command")
    _close_inherited_on_exec()
    return os.posix_spawn(
        _executable(argv[0], env),
        argv,
        env,
        file_actions=actions,
        setsid=new_session,
        setsigdef=RESTORED_SIGNALS,
    )


def _popen(argv: list[str], env: Mapping[str, str], fd: int, cwd: str) -> subprocess.Popen[bytes]:
    """An instance with a working directory, started as the local launcher does."""
    import subprocess

    return subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=fd,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
    )


def become_subreaper() -> bool:
    """``prctl(PR_SET_CHILD_SUBREAPER, 1)`` (``process.become_subreaper``) through
    ``_ctypes`` itself: the ctypes module (its dozens of C types, struct) was ~6 ms of the
    agent's CPU before its first launch, for this one call."""
    try:
        import _ctypes

        class Int(_ctypes._SimpleCData):  # type: ignore[type-arg]
            _type_ = "i"

        class Prctl(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = Int

        class Libc:  # what a function pointer is looked up in (ctypes.CDLL(None))
            _handle = _ctypes.dlopen(None, 0)  # type: ignore[arg-type]

        prctl = Prctl(("prctl", Libc()))  # type: ignore[arg-type]
        return bool(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (ImportError, OSError, AttributeError):  # pragma: no cover - non-Linux
        return False


def _wait(pid: int) -> None:
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except ChildProcessError:
            return
        except InterruptedError:  # pragma: no cover - retried by the interpreter (PEP 475)
            continue


def node_address(interface: str | None, timeout: float = 10.0) -> str:
    """What this node says its address is, as text the orchestrator picks an IPv4 address
    from: the same probe the allocation's own lookup step runs on every node
    (``hostname -I``, or the site's interface), so both ways give the same address."""
    argv = ["ip", "-4", "-o", "addr", "show", "dev", interface] if interface else ["hostname", "-I"]
    read, write = os.pipe2(os.O_CLOEXEC)
    try:
        try:
            streams = [
                (os.POSIX_SPAWN_DUP2, write, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ]
            pid = spawn(argv, os.environ, streams, new_session=False)
        except OSError as exc:
            return f"({argv[0]} failed: {exc})"
        finally:
            os.close(write)
        out = b""
        deadline = time.monotonic() + timeout
        poller = select.poll()
        poller.register(read, select.POLLIN)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                try:
                    os.kill(pid, _signal.SIGKILL)
                except OSError:
                    pass
                _wait(pid)
                return f"({argv[0]} failed: no answer within {timeout:g}s)"
            if not poller.poll(left * 1000 + 1):
                continue
            data = os.read(read, 1 << 16)
            if not data:
                break
            out += data
        _wait(pid)
        return out.decode(errors="replace")
    finally:
        os.close(read)


# ------------------------------------------------------------------ the connection


def _connect(host: str, port: int) -> _socket.socket:
    """``socket.create_connection`` with the host looked up as bytes (a str goes through
    the idna codec, whose imports cost every node's agent ~2 ms), on the bare ``_socket``
    type (the second part wraps it in ``socket.socket``)."""
    name = host.encode() if host.isascii() else host.encode("idna")
    error: OSError = OSError(f"no address for {host}")
    for family, kind, proto, _, address in _socket.getaddrinfo(name, port, 0, _socket.SOCK_STREAM):
        sock = _socket.socket(family, kind, proto)
        try:
            sock.settimeout(CONNECT_FOR)
            sock.connect(address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        return sock
    raise error


def connect(
    host: str, port: int, key: bytes, node: str, address: str | None = None
) -> tuple[wire.Lines, wire.Session]:
    deadline = time.monotonic() + CONNECT_FOR
    delay = 0.05
    while True:
        try:
            sock = _connect(host, port)
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                why = f"cannot reach the orchestrator at {host}:{port}: {exc}"
                raise wire.ChannelError(why) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    sock.settimeout(None)
    try:
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
    except OSError:
        pass
    lines = wire.Lines(sock)
    try:
        return lines, wire.agent_handshake(lines, key, node, address=address)
    except BaseException:
        sock.close()
        raise


class Start:
    """The agent's first part: everything up to the hand-over to :mod:`.serve`."""

    def __init__(self, lines: wire.Lines, session: wire.Session, node: str, job_dir: str):
        self.lines = lines
        self.session = session
        self.node = node
        self.job_dir = job_dir
        self.setup: dict[str, Any] = {}
        self.cgroup: JobCgroup | None = None
        self.launched: list[Launched] = []
        #: an opened message this part does not handle: the second part does it first
        self.pending: dict[str, Any] | None = None
        self.last_heard = time.monotonic()
        self.job_env: dict[str, str] = {}
        #: why the orchestrator counts as lost (``None`` while it does not)
        self.lost: str | None = None
        #: once handed over: how long the orchestrator may stay silent from now
        self.left = LOST_AFTER
        #: a line this part does not handle came: the rest stays unread for the second part
        self._blocked = False
        #: the orchestrator said its launches are done for now
        self._load_now = False
        self._exits: list[int] = []
        self._loader: Any = None
        #: set by the loading thread when it is done (loaded or failed)
        self._loaded = False
        self._wake_r = self._wake_w = -1
        self._poller: Any = None
        self._listening = True
        self._subreaper = False

    def send(self, message: dict[str, Any]) -> None:
        try:
            self.lines.sock.sendall(self.session.seal(message))
        except OSError:
            pass

    def receive_setup(self, timeout: float) -> dict[str, Any]:
        """The orchestrator's first message, which must be the setup: Lost when it does
        not come (or fails its check), ChannelError when it is something else."""
        try:
            line = self.lines.readline(timeout, wire.MAX_LINE)
        except wire.ChannelError as exc:
            text = str(exc)
            if text.startswith("no answer within"):
                text = f"no word from the orchestrator for {timeout:g}s"
            elif text.startswith("connection closed"):
                text = "connection closed"
            raise Lost(text) from None
        try:
            setup = self.session.open(line)
        except wire.ChannelError as exc:
            raise Lost(str(exc)) from None
        if setup.get("op") != "setup" or not isinstance(setup.get("cookie"), str):
            raise wire.ChannelError("the orchestrator's first message is not the setup")
        self.setup = setup
        self.last_heard = time.monotonic()
        return setup

    def prepare(self) -> dict[str, Any]:
        """What the local launcher's ``prepare`` does for a node: the job's cgroup (named
        after the node too: agents of nodes that share a kernel never share one)."""
        from srt_services.launch.agent import job_vars
        from srt_services.launch.cgroup import JobCgroup

        self.cgroup = JobCgroup.create(self.setup["cookie"], self.node)
        self.job_env = job_vars()
        return {"pid": os.getpid(), "cgroup": self.cgroup.path if self.cgroup else None}

    # ------------------------------------------------------------------ launches

    def launch(self, m: dict[str, Any]) -> None:
        """Start one instance as the local launcher does (``LocalLauncher.launch``): its
        own session and process group, stdin from /dev/null, output appended to its log,
        its cgroup leaf."""
        from srt_services import procfs

        if not self._subreaper:
            # before anything is started: whatever an instance daemonizes stays below us
            become_subreaper()
            self._subreaper = True
        lid, step = int(m["lid"]), str(m["step"])
        argv = list(m["argv"])
        if m.get("preamble"):
            from srt_services.launch.process import wrap_preamble

            argv = wrap_preamble(argv, m["preamble"], f"srt:{step}")
        env = {**self.job_env, **m["env"]}
        log = m["log"]
        popen: subprocess.Popen[bytes] | None = None
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            try:
                if m.get("cwd") is None:
                    streams = [
                        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDWR, 0),
                        (os.POSIX_SPAWN_DUP2, fd, 1),
                        (os.POSIX_SPAWN_DUP2, fd, 2),
                    ]
                    pid = spawn(argv, env, streams)
                else:
                    # posix_spawn cannot change directory: an instance with one (a
                    # checkout's) is started by subprocess, as the local launcher does
                    popen = _popen(argv, env, fd, m["cwd"])
                    pid = popen.pid
            finally:
                os.close(fd)
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            try:
                with open(log, "a", encoding="utf-8") as fh:
                    fh.write(f"srt: cannot execute {argv[0] if argv else '?'}: {why}\n")
            except OSError:
                pass
            self.send({"ev": "exited", "lid": lid, "code": 127, "error": why})
            return
        if self.cgroup is not None:
            self.cgroup.adopt(pid, step)
        one = Launched(lid, step, pid, popen, m)
        one.ticks = procfs.start_ticks(pid)
        self.launched.append(one)
        self.send({"ev": "started", "lid": lid, "pid": pid, "ticks": one.ticks})

    # ------------------------------------------------------------------ the loop

    def run(self) -> None:
        """Heartbeat and launch until the agent needs the rest of its machinery, load it
        (in a thread: meanwhile this loop goes on heartbeating, launching, and noticing a
        lost orchestrator at once), and return once it is loaded. :attr:`lost` says why
        the orchestrator counts as lost by then, if it does; :attr:`left` how long it may
        stay silent from now."""
        # an instance's exit (SIGCHLD) and the end of the loading wake the loop (this pipe)
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        old_wakeup = _signal.set_wakeup_fd(self._wake_w)
        _signal.signal(_signal.SIGCHLD, lambda signum, _: self._exits.append(signum))
        self._poller = select.poll()
        self._poller.register(self.lines.sock, select.POLLIN)
        self._poller.register(self._wake_r, select.POLLIN)
        try:
            self._loop()
        finally:
            sys.setswitchinterval(SWITCH_INTERVAL)
            _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
            _signal.set_wakeup_fd(old_wakeup)
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _loop(self) -> None:
        every = float(self.setup.get("heartbeat", HEARTBEAT))
        lost_after = float(self.setup.get("lost_after", LOST_AFTER))
        settle = float(os.environ.get(SETTLE_VAR) or SETTLE)
        next_beat = time.monotonic() + every
        settle_at: float | None = None
        while True:
            now = time.monotonic()
            if not self._blocked and self.lost is None:
                launched = len(self.launched)
                self._blocked = self._take_lines()
                if len(self.launched) != launched:
                    settle_at = now + settle  # launches came: wait until they stop
                if now - self.last_heard >= lost_after:
                    self._lose(f"no word from the orchestrator for {lost_after:g}s")
            if self._loader is None and self._wanted(settle_at, now):
                self._load()
            if self._loaded:
                self.left = 0.0 if self.lost else self.last_heard + lost_after - now
                return
            if now >= next_beat and self.lost is None:
                self.send({"ev": "beat"})
                next_beat = now + every
            self._wait(self._next_wake(next_beat, settle_at, lost_after))

    def _next_wake(self, next_beat: float, settle_at: float | None, lost_after: float) -> float:
        if self.lost is not None:
            return time.monotonic() + 1.0  # no more beats: only the loading wakes it
        wake = next_beat
        if not self._blocked:
            wake = min(wake, self.last_heard + lost_after)
        if settle_at is not None and self._loader is None:
            wake = min(wake, settle_at)
        return wake

    def _wanted(self, settle_at: float | None, now: float) -> bool:
        """Whether the second part is needed now."""
        return (
            self._blocked
            or self._load_now
            or self.lost is not None
            or bool(self._exits)
            or (settle_at is not None and now >= settle_at)
            or any(x.follow or x.ports for x in self.launched)
        )

    def _load(self) -> None:
        def load() -> None:
            try:
                if sys.flags.no_site:
                    # started without ``site`` (agents_step.agent_command): the rest may
                    # need the environment's packages (inotify_simple, psutil)
                    import site

                    site.main()
                import srt_services.launch.agent.node
                import srt_services.launch.agent.serve  # noqa: F401
            finally:
                self._loaded = True
                try:
                    os.write(self._wake_w, b"\0")
                except OSError:
                    pass

        # the first of the rest's imports: the loading's thread is one of threading's
        import threading

        # while the thread imports, this loop takes the interpreter back within 1 ms (not
        # 5) when the socket wakes it: a lost orchestrator is noted before Slurm, which
        # ends the job's steps once the batch script (the orchestrator) died, ends it
        sys.setswitchinterval(0.001)
        self._loader = threading.Thread(target=load, name="srt-agent-load", daemon=True)
        self._loader.start()

    def _wait(self, until: float) -> None:
        """Wait for the socket or the wake pipe, at most until ``until``."""
        if self._listening and (self._blocked or self.lost is not None):
            # the rest is the second part's to read (an end included)
            self._poller.unregister(self.lines.sock)
            self._listening = False
        for fd, _ in self._poller.poll(max(0.0, until - time.monotonic()) * 1000 + 1):
            if fd == self._wake_r:
                try:
                    os.read(self._wake_r, 512)
                except OSError:
                    pass
                continue
            try:
                if not self.lines.fill(wire.MAX_LINE):
                    self._lose("connection closed")
            except wire.ChannelError:
                self._lose("a frame longer than the channel allows")
            except OSError as exc:
                self._lose(f"connection error: {exc}")

    def _lose(self, why: str) -> None:
        """The orchestrator is gone: said at once (the batch script's death ends the job's
        steps within the second), stopped by the second part as soon as it is loaded."""
        if self.lost is not None:
            return
        self.lost = why
        note(f"orchestrator lost ({why}); stopping {len(self.launched)} instance(s) on {self.node}")

    def _take_lines(self) -> bool:
        """Handle every whole line read; True when one needs :mod:`.serve` (anything but
        a beat or a launch is handed over opened). A frame that fails its check means the
        orchestrator can no longer be trusted."""
        while (line := self.lines.take()) is not None:
            try:
                m = self.session.open(line)
            except wire.ChannelError as exc:
                self._lose(str(exc))
                return False
            self.last_heard = time.monotonic()
            op = m.get("op")
            if op == "beat":
                continue
            if op == "load":
                self._load_now = True
                continue
            if op != "launch":
                self.pending = m
                return True
            try:
                self.launch(m)
            except (KeyError, TypeError, ValueError):
                self.pending = m  # serve() says what it cannot read, as for any request
                return True
        return False


class Lost(Exception):
    """The orchestrator went away (or failed its check) before the setup."""


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse(sys.argv[1:] if argv is None else argv)
    except Usage as exc:
        sys.stderr.write(USAGE + f"python -m srt_services.launch.agent: error: {exc}\n")
        return 2
    node = opts.get("node") or os.environ.get("SLURMD_NODENAME") or _socket.gethostname()
    node = node.split(".")[0] if not opts.get("node") else node
    if opts.get("log_dir"):
        _open_log(opts["log_dir"], node)
    serving = False

    def on_signal(signum: int, _frame: Any) -> None:
        if serving:
            note(f"{SIGNAL_NAMES[signum]}: the orchestrator stops the job's instances in order")
        else:
            raise Stopped

    for sig in SIGNAL_NAMES:
        _signal.signal(sig, on_signal)
    try:
        address = node_address(opts.get("interface")) if opts["report_address"] else None
        key = wire.read_key(opts["key_file"])
        lines, session = connect(opts["host"], opts["port"], key, node, address)
        start = Start(lines, session, node, opts["job_dir"])
        setup = start.receive_setup(opts["setup_within"])
        serving = True
    except wire.ChannelError as exc:
        note(f"cannot serve: {exc}")
        return 2
    except Lost as exc:
        note(f"orchestrator lost before the job started ({exc})")
        return 3
    except Stopped:
        note("stopped before it could serve")
        return 2
    start.send({"ev": "ready", **start.prepare()})
    note(f"serving {node} for job {setup.get('job_id', '?')}")
    start.run()
    from srt_services.launch.agent.serve import serve

    return serve(start, note)


def exit_now(code: int) -> None:
    """End the process without the interpreter's teardown: by now every instance of the
    node is gone and every message is sent, and 64 agents tearing down their interpreters
    at once (tens of ms of CPU each) were most of the wait for the agents' step to end."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


def run() -> None:
    """The agents' step's entry (``python -S -c``: see ``agents_step.agent_command``)."""
    exit_now(main())


if __name__ == "__main__":
    run()
