"""What a node agent does on its node, with the local launcher's own machinery.

Every instance the orchestrator asks for is started by a
:class:`~srt_services.launch.local.LocalLauncher`: its own session and process group, the
job's cgroup on this node where the kernel gives one (named after the node too, so the
agents of nodes that share a kernel never share a cgroup), exits heard on SIGCHLD by the
agent's :class:`~srt_services.launch.children.ChildWatcher`, and the agent a child
subreaper, so whatever an instance daemonizes stays below it and is found by the same
stray scan the local launcher uses. Stopping a step signals its process group, then what
escaped it (its cgroup leaf, its session, its cookie); the last sweep waits on pidfds
until nothing of the job is left on the node, and says what survived SIGKILL.

The orchestrator names attempts by a launch id (``lid``), steps by name: an attempt's exit
is reported by its launch id, so a restart's new attempt is never confused with the old.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from srt_services import procfs
from srt_services.contracts.handle import Handle
from srt_services.contracts.launcher import LaunchSettings
from srt_services.contracts.plan import Plan, PlannedInstance
from srt_services.launch import portcheck, process
from srt_services.launch.agent import job_vars
from srt_services.launch.agent.watch import FileWatch, watch_ports
from srt_services.launch.children import ChildWatcher
from srt_services.launch.local import LocalLauncher
from srt_services.launch.pidwatch import ExitWatch
from srt_services.launch.slurm.nodelocal import own_tree

if TYPE_CHECKING:
    from srt_services.launch.agent.handover import Launched
    from srt_services.launch.cgroup import JobCgroup

Send = Callable[[dict[str, Any]], None]
Note = Callable[[str], None]

#: How long SIGKILLed processes may take to disappear before they are reported.
KILL_WAIT = 5.0
#: The longest grace the agent gives its instances when it stops them on its own (the
#: orchestrator is gone): a bound on how long a job can outlive its orchestrator.
LOST_GRACE_MAX = 10.0
#: How long the agent watches for an instance's ports to be listened on.
PORT_WATCH = 600.0


def signal_groups(pids: Iterable[int], *sigs: int) -> None:
    """Each of ``sigs`` to each process's group (never the agent's own) and to itself."""
    mine = os.getpgrp()
    done: set[int] = set()
    for pid in pids:
        try:
            pgid = os.getpgid(pid)
        except OSError:
            continue
        if pgid != mine and pgid not in done:
            done.add(pgid)
            for sig in sigs:
                process.signal_group(pgid, sig)
        for sig in sigs:
            process.signal_pid(pid, sig)


class NodeAgent:
    """The instances of one node: launched, signalled, swept, reported."""

    def __init__(
        self,
        node: str,
        job_dir: str,
        setup: dict[str, Any],
        watcher: ChildWatcher,
        send: Send,
        note: Note,
        cgroup: JobCgroup | None = None,
    ) -> None:
        self.node = node
        self.job_dir = job_dir
        self.cookie: str = setup["cookie"]
        self.job_id: str = setup.get("job_id", "")
        self.local_dir: str | None = setup.get("local_dir")
        self.send = send
        self.note = note
        self.watcher = watcher
        plan = Plan(
            version=1,
            job_name=setup.get("job_name", ""),
            job_id=self.job_id,
            job_dir=job_dir,
            allocation="slurm",
            nodes=[],
            head=node,
            infra=node,
            client=node,
            units=[],
            phases={},
            discovery_env={},
            ports=[],
            scrape_targets=[],
            local_dir=self.local_dir,
        )
        self.launcher = LocalLauncher(plan, job_dir, LaunchSettings(cookie=self.cookie))
        self.launcher.cgroup_tag = node
        # the job's cgroup on this node, made by the agent's first part (its ``prepare``)
        self.launcher.cgroup = cgroup
        self.launcher.attach(watcher)
        self.job_env = job_vars()
        #: launch id -> the running attempt
        self.running: dict[int, Handle] = {}
        #: launch id -> its stop grace (what the orchestrator would give it)
        self.graces: dict[int, float] = {}
        self.files = FileWatch(self._file_changed)
        self.calls: dict[int, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()

    def adopt(self, one: Launched) -> None:
        """An instance the agent's first part started: watched, stopped and swept as if
        this launcher had started it (its session remembered, its exit heard), its probes'
        files and ports watched from now on (each followed file reported once: what was
        written before its watch began is not missed)."""
        self.launcher.adopt_started(one.pid, one.step)
        h = Handle(
            step=one.step,
            unit="",
            node=self.node,
            pid=one.pid,
            pgid=one.pid,
            start_ticks=one.ticks,
            log_path=one.log,
            log_offset=0,
            started_wall=0.0,
            started_mono=0.0,
            popen=one.popen,
            extra={"stop_signal": one.stop_signal},
        )
        self._supervise(one.lid, h, one.grace, one.follow, one.ports)
        for path, _ in one.follow:
            self._file_changed(path)

    # ------------------------------------------------------------------ instances

    def launch(self, m: dict[str, Any]) -> None:
        lid = int(m["lid"])
        inst = PlannedInstance(
            step=m["step"],
            unit=m.get("unit", ""),
            node=self.node,
            node_ip="",
            index=0,
            argv=list(m["argv"]),
            env={},
            log=m["log"],
            work_dir="",
            preamble=m.get("preamble"),
            cwd=m.get("cwd"),
            stop_signal=m.get("stop_signal", "TERM"),
        )
        env = {**self.job_env, **m["env"]}
        try:
            h = self.launcher.launch(inst, env, m["log"])
        except (OSError, ValueError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else str(exc)
            with contextlib.suppress(OSError), open(m["log"], "a", encoding="utf-8") as fh:
                fh.write(f"srt: cannot execute {inst.argv[0] if inst.argv else '?'}: {why}\n")
            self.send({"ev": "exited", "lid": lid, "code": 127, "error": why})
            return
        h.start_ticks = procfs.start_ticks(h.pid)
        self.send({"ev": "started", "lid": lid, "pid": h.pid, "ticks": h.start_ticks})
        ports = [int(p) for p in m.get("ports", [])]
        self._supervise(lid, h, float(m.get("grace", 10.0)), m.get("follow", []), ports)

    def _supervise(
        self, lid: int, h: Handle, grace: float, follow: list[Any], ports: list[int]
    ) -> None:
        self.running[lid] = h
        self.graces[lid] = grace
        self.watcher.watch(h.pid, lambda code: self._exited(lid, code), h.popen)
        for path, seconds in follow:
            self.files.follow(path, seconds)
        if ports:
            self._spawn(
                watch_ports(
                    ports,
                    lambda port: self.launcher.owns_listener(h, port),
                    lambda: lid in self.running,
                    lambda port, owned: self.send(
                        {"ev": "port", "lid": lid, "port": port, "owned": owned}
                    ),
                    PORT_WATCH,
                )
            )

    def _exited(self, lid: int, code: int) -> None:
        h = self.running.pop(lid, None)
        self.graces.pop(lid, None)
        if h is not None:
            h.returncode = code
        self.send({"ev": "exited", "lid": lid, "code": code})

    def _file_changed(self, path: str) -> None:
        self.send({"ev": "file", "path": path})

    def _handles(self, lids: Iterable[int]) -> list[Handle]:
        return [h for lid in lids if (h := self.running.get(int(lid))) is not None]

    def _strays(self, steps: set[str] | None, final: bool = False) -> list[int]:
        found = self.launcher.stray_processes(self.cookie, final=final)
        chosen = [pid for pid, step in found.items() if steps is None or step in steps]
        if final:
            # the last look reads every process carrying the job's cookie; where nodes
            # share a kernel (network namespaces of one machine) that includes the other
            # nodes' instances, which say which node they run on
            chosen = [pid for pid in chosen if self._here(pid)]
        return chosen

    def _here(self, pid: int) -> bool:
        node = (process.environ_of(pid) or {}).get("SRT_NODE")
        return node is None or node == self.node

    async def signal(self, m: dict[str, Any]) -> None:
        """TERM (each attempt's own stop signal) or KILL to attempts and to what escaped
        their steps' process groups."""
        handles = self._handles(m.get("lids", []))
        steps = set(m.get("steps", []))
        if m.get("sig") == "KILL":
            await self.launcher.kill(handles)
            signal_groups(self._strays(steps), signal.SIGKILL)
            self.launcher.sweep(sorted(steps))
        else:
            await self.launcher.terminate(handles)
            signal_groups(self._strays(steps), signal.SIGTERM, signal.SIGCONT)

    def sweep(self, m: dict[str, Any]) -> None:
        steps = m.get("steps")
        chosen = None if steps is None else set(steps)
        signal_groups(self._strays(chosen, final=chosen is None), signal.SIGKILL)
        self.launcher.sweep(None if chosen is None else sorted(chosen))

    # ------------------------------------------------------------------ calls

    def call(self, m: dict[str, Any]) -> None:
        """Run a request in a task of its own; its reply carries the request's id."""
        cid = int(m["id"])
        task = asyncio.ensure_future(self._answer(cid, m.get("fn", ""), m.get("args", {})))
        self.calls[cid] = task
        task.add_done_callback(lambda _: self.calls.pop(cid, None))

    def cancel(self, m: dict[str, Any]) -> None:
        task = self.calls.get(int(m["id"]))
        if task is not None:
            task.cancel()

    async def _answer(self, cid: int, fn: str, args: dict[str, Any]) -> None:
        try:
            value = await self._dispatch(fn, args)
        except asyncio.CancelledError:
            self.send({"ev": "reply", "id": cid, "ok": False, "error": "cancelled"})
            raise
        except Exception as exc:
            self.send(
                {"ev": "reply", "id": cid, "ok": False, "error": f"{type(exc).__name__}: {exc}"}
            )
            return
        self.send({"ev": "reply", "id": cid, "ok": True, "value": value})

    async def _dispatch(self, fn: str, args: dict[str, Any]) -> Any:
        if fn == "oneshot":
            result = await self.launcher.run_oneshot(
                list(args["argv"]),
                self.node,
                args["log"],
                {**self.job_env, **args["env"]},
                float(args["timeout"]),
                cwd=args.get("cwd"),
            )
            return {
                "code": result.code,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "timed_out": result.timed_out,
            }
        if fn == "ports":
            return self._ports(args)
        if fn == "exists":
            return os.path.exists(args["path"])
        if fn == "final":
            return await self.final()
        raise ValueError(f"unknown request {fn!r}")

    def _ports(self, args: dict[str, Any]) -> dict[str, Any]:
        from dataclasses import asdict

        reaped = [
            {"pid": pid, "killed": portcheck.reap(pid, ticks)}
            for pid, ticks in args.get("reap", [])
        ]
        targets = [(str(a), int(p)) for a, p in args.get("targets", [])]
        return {"reaped": reaped, "ports": [asdict(r) for r in portcheck.check(targets)]}

    # ------------------------------------------------------------------ the end

    async def final(self) -> dict[str, Any]:
        """Nothing of the job may be left on this node: kill what is, wait on pidfds until
        it is gone, remove the node-local tree; say what survived."""
        left = await self._kill_everything()
        removed = self._remove_local_dir()
        self.launcher.close()
        return {"survivors": left, "local_dir_left": removed}

    async def stop_all(self, why: str, noted: bool = False) -> None:
        """The orchestrator is gone: stop every instance as it would have (the stop
        signal, the grace, bounded by ``LOST_GRACE_MAX``, then SIGKILL), then leave
        nothing of the job on this node. ``noted``: the loss is in the log already."""
        handles = list(self.running.values())
        if not noted:
            self.note(
                f"orchestrator lost ({why}); stopping {len(handles)} instance(s) on {self.node}"
            )
        if handles:
            await self.launcher.terminate(handles)
        signal_groups(self._strays(None), signal.SIGTERM, signal.SIGCONT)
        grace = min(max(self.graces.values(), default=0.0), LOST_GRACE_MAX)
        watch = ExitWatch()
        try:
            await watch.wait([h.pid for h in handles], asyncio.get_running_loop().time() + grace)
        finally:
            watch.close()
        left = await self._kill_everything()
        self._remove_local_dir()
        self.launcher.close()
        if left:
            self.note("could not stop: " + "; ".join(left))
        else:
            self.note(f"nothing of the job is left on {self.node}")

    async def _kill_everything(self) -> list[str]:
        loop = asyncio.get_running_loop()
        end = loop.time() + KILL_WAIT
        watch = ExitWatch()
        try:
            await self.launcher.kill(list(self.running.values()))
            while True:
                pids = [h.pid for h in self.running.values()]
                pids += self._strays(None, final=True)
                pids = watch.alive(pids)
                if not pids:
                    return []
                if loop.time() >= end:
                    return [f"pid {p} on {self.node} (state {procfs.proc_state(p)})" for p in pids]
                signal_groups(pids, signal.SIGKILL)
                self.launcher.sweep(None)
                watch.add(pids, seen_alive=True)
                await watch.wait(pids, min(end, loop.time() + 1.0))
        finally:
            watch.close()

    def _remove_local_dir(self) -> bool:
        """Remove the job's node-local tree; True when it is still there."""
        root = self.local_dir
        if not root or not os.path.lexists(root) or not own_tree(root, self.job_id):
            return False
        shutil.rmtree(root, ignore_errors=True)
        return os.path.lexists(root)

    def close(self) -> None:
        self.files.close()
        for task in list(self._tasks) + list(self.calls.values()):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
