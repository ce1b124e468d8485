"""The node agent as a real process on this machine, driven over its real channel.

The test plays the orchestrator with the same channel code (:mod:`.wire`): it listens on
loopback, starts ``python -m srt_services.launch.agent`` pointed at it, and asks it to
launch, signal and sweep. What Slurm adds (one step across the nodes) is tested on the
Slurm test cluster (tests/slurm/test_agents.py); here is what the agent itself must do:
report exits and PIDs, stop what escaped a process group, and stop everything of the job
on its own, within a bound, when its orchestrator is gone (the connection closed, a frame
forged, or silence past the heartbeat).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from srt_services import procfs
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.launch.agent import SETTLE_VAR, wire
from srt_services.launch.agent.node import KILL_WAIT, LOST_GRACE_MAX

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Linux process model")


def _holders(cookie: str) -> list[int]:
    """Live processes carrying the job's cookie."""
    needle = f"{COOKIE_VAR}={cookie}".encode()
    out = []
    for pid in procfs.all_pids():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle in env and procfs.alive(pid):
            out.append(pid)
    return out


class Orchestrator:
    """The orchestrator's end of one agent's channel, run by the test."""

    def __init__(
        self,
        tmp: Path,
        lost_after: float = 10.0,
        settle: float | None = None,
        pass_fds: tuple[int, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.tmp = tmp
        #: descriptors the agent inherits, and variables it gets, besides the usual
        self.pass_fds = pass_fds
        self.env = env or {}
        #: how long the agent's first part waits after a launch before loading the rest
        #: (``SRT_AGENT_SETTLE``: 0 loads at once, 60 keeps it in its first part)
        self.settle = settle
        self.cookie = secrets.token_hex(16)
        self.key_file = str(tmp / "agents.key")
        self.key = wire.write_key(self.key_file)
        self.lost_after = lost_after
        self.local_dir = str(tmp / "local" / "srt-77")
        self.messages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.session: wire.Session | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.agent: subprocess.Popen[bytes] | None = None
        self.connected = asyncio.Event()
        self.log = tmp / "agent.out"

    async def start(self, beats: bool = True) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        self.beats = beats
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env.update(self.env)
        if self.settle is not None:
            env[SETTLE_VAR] = str(self.settle)
        with open(self.log, "ab") as out:
            self.agent = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "srt_services.launch.agent",
                    "--connect",
                    f"127.0.0.1:{port}",
                    "--key-file",
                    self.key_file,
                    "--job-dir",
                    str(self.tmp),
                    "--node",
                    "n1",
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                pass_fds=self.pass_fds,
            )
        await asyncio.wait_for(self.connected.wait(), 30)
        ready = await self.expect("ready")
        assert ready["pid"] == self.agent.pid

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = await wire.orchestrator_handshake(reader, writer, self.key, 10.0)
        self.session, self.writer = hello.session, writer
        self.send(
            {
                "op": "setup",
                "cookie": self.cookie,
                "job_id": "77",
                "local_dir": self.local_dir,
                "heartbeat": 0.2,
                "lost_after": self.lost_after,
            }
        )
        self.connected.set()
        beat = asyncio.ensure_future(self._beat()) if self.beats else None
        try:
            while line := await reader.readline():
                await self.messages.put(self.session.open(line))
        finally:
            if beat is not None:
                beat.cancel()
            await self.messages.put({"ev": "<closed>"})

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            self.send({"op": "beat"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.session is not None and self.writer is not None
        self.writer.write(self.session.seal(message))

    async def expect(self, ev: str, timeout: float = 15.0, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            m = await asyncio.wait_for(self.messages.get(), max(left, 0.01))
            if m.get("ev") == ev and all(m.get(k) == v for k, v in match.items()):
                return m

    def launch(self, lid: int, step: str, script: str, **extra: Any) -> None:
        env = {
            "PATH": os.environ["PATH"],
            COOKIE_VAR: self.cookie,
            INSTANCE_VAR: step,
            "SRT_NODE": "n1",
        }
        self.send(
            {
                "op": "launch",
                "lid": lid,
                "step": step,
                "argv": ["bash", "-c", script],
                "env": env,
                "log": str(self.tmp / f"{step}.out"),
                "grace": 5.0,
                **extra,
            }
        )

    async def call(self, cid: int, fn: str, args: dict[str, Any]) -> dict[str, Any]:
        self.send({"op": "call", "id": cid, "fn": fn, "args": args})
        return await self.expect("reply", id=cid)

    async def agent_exit(self, timeout: float = 20.0) -> int:
        assert self.agent is not None
        deadline = time.monotonic() + timeout
        while self.agent.poll() is None:
            assert time.monotonic() < deadline, "the agent did not exit"
            await asyncio.sleep(0.02)
        return self.agent.returncode

    def close(self) -> None:
        if self.agent is not None and self.agent.poll() is None:
            self.agent.kill()
            self.agent.wait()
        for pid in _holders(self.cookie):
            os.kill(pid, 9)
        self.server.close()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


#: the agent loads its second part at once after a launch, or stays in its first part
#: (which launches) until something needs the second: an exit, a request, a lost orchestrator
PARTS = pytest.mark.parametrize("settle", [0.0, 60.0], ids=["loaded", "first-part"])


@PARTS
def test_launch_exit_stop_escaped_daemons_and_the_last_sweep(tmp_path: Path, settle: float) -> None:
    async def body() -> None:
        o = Orchestrator(tmp_path, settle=settle)
        try:
            await o.start()
            os.makedirs(o.local_dir)
            marker = tmp_path / "term"
            o.launch(1, "service_quick", "echo hi; exit 3")
            started = await o.expect("started", lid=1)
            assert procfs.start_ticks(started["pid"]) in (started["ticks"], None)
            assert (await o.expect("exited", lid=1))["code"] == 3
            assert (tmp_path / "service_quick.out").read_text() == "hi\n"
            # a service whose TERM trap writes a marker, and a daemon that left its group
            o.launch(
                2,
                "service_svc",
                f"trap 'echo term >> {marker}; exit 0' TERM; setsid sleep 300 & echo up;"
                " while true; do sleep 0.05; done",
            )
            await o.expect("started", lid=2)
            deadline = time.monotonic() + 10
            while len(_holders(o.cookie)) < 3 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            o.send({"op": "signal", "sig": "TERM", "lids": [2], "steps": ["service_svc"]})
            assert (await o.expect("exited", lid=2))["code"] == 0
            assert marker.read_text() == "term\n"
            # the escaped sleep got TERM too (it is of the step): nothing is left of the job
            deadline = time.monotonic() + 10
            while _holders(o.cookie) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert not _holders(o.cookie)
            # a daemon that ignores TERM is left for the last sweep, which kills it
            o.launch(3, "service_deaf", "(trap '' TERM; setsid sleep 300) & exit 0")
            assert (await o.expect("exited", lid=3))["code"] == 0
            while not _holders(o.cookie):
                await asyncio.sleep(0.02)
            final = await o.call(1, "final", {})
            assert final["ok"] and final["value"] == {"survivors": [], "local_dir_left": False}
            assert not _holders(o.cookie)
            assert not os.path.exists(o.local_dir), "the node-local tree is removed"
            o.send({"op": "bye"})
            assert await o.agent_exit() == 0
        finally:
            o.close()

    run(body())


def _loaded_asyncio(pid: int) -> bool:
    """Whether the process has asyncio's C part mapped (what importing asyncio loads)."""
    return "_asyncio" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif("_asyncio" in sys.builtin_module_names, reason="_asyncio is built in")
def test_the_agent_launches_before_it_loads_asyncio_and_loads_when_told(tmp_path: Path) -> None:
    """The first part launches without asyncio; the orchestrator's ``load`` (its launches
    are done for now) makes the agent load the rest, and it then serves as before."""

    async def body() -> None:
        o = Orchestrator(tmp_path, settle=60.0)
        try:
            await o.start()
            assert o.agent is not None
            o.launch(1, "service_a", "exec sleep 300")
            await o.expect("started", lid=1)
            assert not _loaded_asyncio(o.agent.pid), "launched by the first part"
            o.send({"op": "load"})
            deadline = time.monotonic() + 20
            while not _loaded_asyncio(o.agent.pid):
                assert time.monotonic() < deadline, "the agent did not load the rest"
                await asyncio.sleep(0.02)
            o.send({"op": "signal", "sig": "KILL", "lids": [1], "steps": ["service_a"]})
            assert (await o.expect("exited", lid=1))["code"] == 137
            o.send({"op": "bye"})
            assert await o.agent_exit() == 0
        finally:
            o.close()

    run(body())


#: what an instance says of itself: its IDs, ignored signals, descriptors, stdin, cwd, env
SELF_REPORT = (
    'read -r st < /proc/$$/stat; set -- ${st#*) }; echo "pid=$$ pgrp=$3 sid=$4";'
    " grep SigIgn /proc/$$/status; echo fds:; ls /proc/$$/fd; echo :fds;"
    ' echo "stdin=$(readlink /proc/$$/fd/0)"; echo "cwd=$PWD";'
    ' echo "mine=$MINE agents=${AGENTS_OWN-unset}"; echo to-stderr >&2; exec sleep 300'
)


@pytest.mark.parametrize("cwd", [False, True], ids=["spawned", "with-cwd"])
def test_the_first_part_starts_an_instance_as_the_local_launcher_does(
    tmp_path: Path, cwd: bool
) -> None:
    """The first part starts an instance with ``os.posix_spawn`` (subprocess is not loaded
    yet; one with a working directory, a checkout's, goes through subprocess): either way
    it gets a session and process group of its own, stdin from /dev/null, stdout and
    stderr appended to its log, the signals the interpreter ignores back at their
    defaults, none of the agent's descriptors (one the agent inherited included), its own
    environment, and its program looked up on its own PATH. One that cannot start is
    reported as exited 127, with the reason in its log."""
    inherited_r, inherited_w = os.pipe()
    os.set_inheritable(inherited_w, True)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "probe-shell").symlink_to(shutil.which("bash") or "/bin/bash")
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "service_me.out"
    log.write_text("before\n")

    async def body() -> None:
        o = Orchestrator(tmp_path, settle=60.0, pass_fds=(inherited_w,), env={"AGENTS_OWN": "1"})
        try:
            await o.start()
            os.close(inherited_w)
            assert o.agent is not None
            env = {
                "PATH": f"{bindir}:{os.environ['PATH']}",
                COOKIE_VAR: o.cookie,
                "MINE": "yes",
            }
            o.send(
                {
                    "op": "launch",
                    "lid": 1,
                    "step": "service_me",
                    "argv": ["probe-shell", "-c", SELF_REPORT],
                    "env": env,
                    "log": str(log),
                    "grace": 5.0,
                    **({"cwd": str(work)} if cwd else {}),
                }
            )
            started = await o.expect("started", lid=1)
            deadline = time.monotonic() + 20
            while not log.read_text().endswith("to-stderr\n"):
                assert time.monotonic() < deadline, log.read_text()
                await asyncio.sleep(0.02)
            assert not _loaded_asyncio(o.agent.pid), "started by the first part"
            text = log.read_text()
            pid = started["pid"]
            assert text.startswith("before\n"), "appended to"
            assert f"pid={pid} pgrp={pid} sid={pid}\n" in text
            ignored = int(text.split("SigIgn:")[1].split()[0], 16)
            assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1))
            assert text.split("fds:\n")[1].split(":fds")[0].split() == ["0", "1", "2"]
            assert "stdin=/dev/null\n" in text
            assert f"cwd={work if cwd else os.getcwd()}\n" in text
            assert "mine=yes agents=unset\n" in text
            o.send({**_launch_of(o, 2, "service_none"), "argv": ["no-such-program-srt"]})
            gone = await o.expect("exited", lid=2)
            assert gone["code"] == 127 and gone["error"] == "No such file or directory"
            assert (tmp_path / "service_none.out").read_text() == (
                "srt: cannot execute no-such-program-srt: No such file or directory\n"
            )
            o.send({"op": "signal", "sig": "KILL", "lids": [1], "steps": ["service_me"]})
            assert (await o.expect("exited", lid=1))["code"] == 137
            o.send({"op": "bye"})
            assert await o.agent_exit() == 0
        finally:
            os.close(inherited_r)
            o.close()

    run(body())


def _launch_of(o: Orchestrator, lid: int, step: str) -> dict[str, Any]:
    return {
        "op": "launch",
        "lid": lid,
        "step": step,
        "env": {"PATH": os.environ["PATH"], COOKIE_VAR: o.cookie},
        "log": str(o.tmp / f"{step}.out"),
        "grace": 5.0,
    }


def test_requests_oneshot_ports_and_files(tmp_path: Path) -> None:
    async def body() -> None:
        o = Orchestrator(tmp_path)
        try:
            await o.start()
            log = tmp_path / "build.out"
            env = {"PATH": os.environ["PATH"], COOKIE_VAR: o.cookie}
            args = {"argv": ["bash", "-c", "echo built; exit 4"], "log": str(log), "env": env}
            got = await o.call(1, "oneshot", {**args, "timeout": 10.0, "cwd": str(tmp_path)})
            assert got["value"]["code"] == 4 and not got["value"]["timed_out"]
            assert log.read_text() == "built\n"
            slow = {**args, "argv": ["sleep", "30"], "timeout": 0.3, "cwd": None}
            got = await o.call(2, "oneshot", slow)
            assert got["value"]["timed_out"], "a one-shot is bounded on the node"
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                s.listen()
                port = s.getsockname()[1]
                got = await o.call(3, "ports", {"targets": [["127.0.0.1", port]], "reap": []})
            (report,) = got["value"]["ports"]
            assert report["free"] is False and report["holders"][0]["pid"] == os.getpid()
            assert (await o.call(4, "exists", {"path": str(log)}))["value"] is True
            bad = await o.call(5, "nosuch", {})
            assert not bad["ok"] and "unknown request" in bad["error"]
            o.send({"op": "bye"})
            assert await o.agent_exit() == 0
        finally:
            o.close()

    run(body())


def _stopping_job(o: Orchestrator, marker: Path) -> None:
    o.launch(
        1,
        "service_a",
        f"trap 'echo term >> {marker}; exit 0' TERM; setsid sleep 300 & echo up;"
        " while true; do sleep 0.05; done",
    )


@PARTS
@pytest.mark.parametrize("how", ["closed", "forged", "silent"])
def test_a_lost_orchestrator_makes_the_agent_stop_everything(
    tmp_path: Path, how: str, settle: float
) -> None:
    """The orchestrator is killed (its connection closes), someone forges a frame, or the
    orchestrator falls silent (a frozen batch node): the agent stops the instance with its
    stop signal, kills what escaped, and exits, all within a bound; whether the loss comes
    while the agent is still in its first part or after it loaded the rest."""

    async def body() -> None:
        o = Orchestrator(tmp_path, lost_after=1.5, settle=settle)
        try:
            await o.start(beats=how != "silent")
            marker = tmp_path / "term"
            _stopping_job(o, marker)
            await o.expect("started", lid=1)
            while len(_holders(o.cookie)) < 3:
                await asyncio.sleep(0.02)
            assert o.writer is not None
            if how == "closed":
                o.writer.transport.abort()  # what the kernel does for a SIGKILLed process
            elif how == "forged":
                o.writer.write(b"0" * 32 + b' {"op":"signal","sig":"KILL","lids":[1]}\n')
            # the bound the agent promises: silence noticed, the grace, the last sweep
            bound = o.lost_after + LOST_GRACE_MAX + KILL_WAIT
            assert await o.agent_exit(timeout=bound) == 3
            assert marker.read_text() == "term\n", "the stop signal came first"
            assert not _holders(o.cookie)
            said = o.log.read_text()
            assert said.count("orchestrator lost") == 1, said
            if how == "silent":
                assert "no word from the orchestrator" in said
            if how == "forged":
                assert "failed its MAC check" in said
        finally:
            o.close()

    run(body())


def test_an_impostor_orchestrator_gets_nothing_done(tmp_path: Path) -> None:
    """An agent pointed at a listener that cannot prove the key gives up and exits."""

    async def body() -> None:
        o = Orchestrator(tmp_path)
        o.key = os.urandom(wire.KEY_BYTES)  # the file on disk holds another key
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(o.start(), 5)
        assert await o.agent_exit() == 2
        assert "did not prove it holds the job's agent key" in o.log.read_text()
        o.close()

    run(body())


def test_a_followed_log_is_reported_when_written(tmp_path: Path) -> None:
    """The agent makes its inotify descriptor at the first file to follow (not at its
    start): the writes of a followed log still reach the orchestrator as file events."""

    async def body() -> None:
        o = Orchestrator(tmp_path)
        try:
            await o.start()
            log = str(tmp_path / "service_talk.out")
            o.launch(1, "service_talk", "sleep 0.3; echo ready; exec sleep 300", follow=[[log, 30]])
            await o.expect("started", lid=1)
            assert (await o.expect("file", path=log))["path"] == log
            o.send({"op": "signal", "sig": "KILL", "lids": [1], "steps": ["service_talk"]})
            await o.expect("exited", lid=1)
        finally:
            o.close()

    run(body())


def test_an_agent_started_with_the_allocation_says_its_address_and_waits_for_its_setup(
    tmp_path: Path,
) -> None:
    """Started before the plan, an agent says its node's address in its hello and waits
    for its setup; when the orchestrator goes away before sending it (its connection
    closes), or never sends it, the agent exits without having started anything."""

    async def body(close_after: float | None) -> tuple[wire.Hello, int]:
        key_file = str(tmp_path / "agents.key")
        key = wire.write_key(key_file)
        hellos: asyncio.Queue[wire.Hello] = asyncio.Queue()

        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await hellos.put(await wire.orchestrator_handshake(reader, writer, key, 10.0))
            if close_after is not None:
                await asyncio.sleep(close_after)
                writer.close()
            else:
                await reader.read()  # say nothing until the agent gives up

        server = await asyncio.start_server(accept, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "srt_services.launch.agent",
                "--connect",
                f"127.0.0.1:{port}",
                "--key-file",
                key_file,
                "--job-dir",
                str(tmp_path),
                "--node",
                "n1",
                "--report-address",
                "--setup-within",
                "1.5",
                "--log-dir",
                str(tmp_path),
            ],
            env=env,
            start_new_session=True,
        )
        try:
            hello = await asyncio.wait_for(hellos.get(), 30)
            deadline = time.monotonic() + 30
            while agent.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            return hello, agent.wait(1)
        finally:
            if agent.poll() is None:
                agent.kill()
            server.close()

    hello, code = run(body(close_after=0.2))
    assert hello.node == "n1" and hello.address is not None
    probe = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False)
    assert hello.address == probe.stdout, "the same probe the lookup step runs on a node"
    log = tmp_path / "srt-agent-n1.out"
    assert code == 3
    assert "orchestrator lost before the job started (connection closed)" in log.read_text()
    log.unlink()
    _, code = run(body(close_after=None))
    assert code == 3, "no setup within --setup-within: it gives up"
    assert "orchestrator lost before the job started (no word from the orchestrator for 1.5s)" in (
        log.read_text()
    )
