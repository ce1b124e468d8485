"""Launching one attempt of an instance: its environment, its files, the launcher's call,
and its exit registered with the child watcher before anything else can happen.

A command that cannot be executed at all (ENOENT, a full disk while writing its files)
is not an error of the orchestrator: the log says why and the attempt takes the ordinary
exit path with code 127, what a shell reports.

Whatever asks for a launch (the first start, the restart policy, ``srt restart``, a
liveness failure) and however those interleave, this is the one place processes are
started, and it keeps one rule: an instance has at most one live attempt, and nothing is
started once the job is stopping. A launch asked for while the instance still runs, or
after the teardown began, is refused and recorded (``launch_refused``), so no process is
ever started that the orchestrator does not track and the teardown does not stop.

Before a restart is started its ``launching`` event (the attempt and where its output will
begin in the log) is written out at once: ``srt logs -f`` reads the log and then the
events, so it always knows of an attempt before it reads a byte of its output.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from srt_services.contracts.servers import EXIT_REASON_FILE, UNAVAILABLE_FILE
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.identity import INSTANCE_VAR
from srt_services.supervise.readiness import Probing
from srt_services.supervise.runs import InstanceRun, PhaseFailed

if TYPE_CHECKING:
    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.plan import PlannedInstance
    from srt_services.jobdir.layout import JobDir
    from srt_services.launch.children import ChildWatcher
    from srt_services.supervise.journal import Journal


class Launching:
    def __init__(
        self,
        job: JobDir,
        launcher: Launcher,
        watcher: ChildWatcher,
        journal: Journal,
        base_env: Mapping[str, str],
        on_exit: Callable[[InstanceRun, int], None],
    ) -> None:
        self.job = job
        self.launcher = launcher
        self.watcher = watcher
        self.journal = journal
        #: the inherited part of every instance's environment, computed once per job
        self.base_env = base_env
        self.on_exit = on_exit

    def launch(self, inst: InstanceRun) -> bool:
        """Start the next attempt of ``inst``; ``False`` when the rule in the module
        docstring refused it (nothing was started)."""
        p = inst.planned
        why = self._refusal(inst)
        if why is not None:
            self.journal.emit("launch_refused", step=p.step, unit=p.unit, detail=why)
            return False
        # Plan-made paths: step names are safe tokens, so no realpath walk per launch.
        log_path = os.path.join(self.job.path, p.log)
        env = dict(self.base_env)
        env.update(p.env)
        env[INSTANCE_VAR] = p.step
        env["SRT_NODE"] = p.node
        env["SRT_NODE_IP"] = p.node_ip
        inst.attempt += 1
        if inst.attempt > 1:
            self._announce(inst, log_path)
        inst.exit_fut = asyncio.get_running_loop().create_future()
        inst.exit_code = None
        inst.killed_for = None
        inst.unavailable = None
        Probing.launching(inst)
        for name in (UNAVAILABLE_FILE, EXIT_REASON_FILE):
            with contextlib.suppress(OSError):  # an earlier attempt's verdict is not this one's
                os.unlink(os.path.join(p.work_dir, name))
        try:
            if needs_work_dir(p):
                write_files(p, self.job.logs)  # a full disk fails this attempt like an exec
            handle = self.launcher.launch(p, env, log_path)
        except (OSError, ValueError) as exc:  # ValueError: a NUL a plugin put in argv
            self._cannot_execute(inst, log_path, exc)
            return True
        inst.handle = handle
        inst.state = "starting"
        inst.waiting_since = time.monotonic()
        self.launcher.watch_exit(handle, functools.partial(self.on_exit, inst))
        self.journal.scrape_targets.started(p.step)
        self.journal.emit(
            "launched",
            step=p.step,
            unit=p.unit,
            node=p.node,
            pid=handle.pid or None,  # an agent reports the PID on its node a moment later
            via=p.via,
            attempt=inst.attempt,
            log=p.log,
            offset=handle.log_offset,  # where this attempt's output starts (srt logs)
        )
        self.journal.mark_dirty()
        return True

    def _refusal(self, inst: InstanceRun) -> str | None:
        if self.journal.run.stopping:
            return "the job is stopping: nothing is started any more"
        if inst.running and inst.handle is not None:
            return (
                f"attempt {inst.attempt} (pid {inst.handle.pid}) still runs: an instance"
                " has one live attempt at a time"
            )
        return None

    def _announce(self, inst: InstanceRun, log_path: str) -> None:
        """The ``launching`` event of a restart, on disk before its process exists."""
        try:
            offset: int | None = os.stat(log_path).st_size
        except OSError:
            offset = 0 if not os.path.lexists(log_path) else None
        p = inst.planned
        self.journal.emit(
            "launching", step=p.step, unit=p.unit, node=p.node, attempt=inst.attempt,
            offset=offset,
        )  # fmt: skip
        self.journal.flush_events()

    def _cannot_execute(self, inst: InstanceRun, log_path: str, error: Exception) -> None:
        """The command could not be executed at all: the log says why, and the instance
        takes the ordinary exit path with code 127 (what a shell reports)."""
        p = inst.planned
        why = error.strerror if isinstance(error, OSError) else str(error)
        with contextlib.suppress(OSError), open(log_path, "a", encoding="utf-8") as fh:
            fh.write(f"srt: cannot execute {p.argv[0] if p.argv else '?'}: {why}\n")
        inst.handle = None
        inst.state = "starting"
        inst.waiting_since = time.monotonic()
        self.journal.emit("launch_failed", step=p.step, unit=p.unit, node=p.node, error=why)
        asyncio.get_running_loop().call_soon(self.on_exit, inst, 127)


def needs_work_dir(p: PlannedInstance) -> bool:
    """Create ``work/<step>`` only for instances that use it (files, or ``{work_dir}``)."""
    if p.files:
        return True
    w = p.work_dir
    return (
        any(w in a for a in p.argv)
        or (p.preamble is not None and w in p.preamble)
        or (p.cwd is not None and p.cwd.startswith(w))
        or any(w in v for v in p.env.values())
    )


def write_files(p: PlannedInstance, log_dir: str) -> None:
    """Write the files a kind asked for: a relative name into the instance's work
    directory, a ``{log_dir}/...`` one into the job's log directory; never elsewhere."""
    work = p.work_dir
    os.makedirs(work, exist_ok=True)
    if not p.files:
        return
    roots = [os.path.realpath(d) + os.sep for d in (work, log_dir)]
    for name, content in p.files.items():
        target = os.path.realpath(os.path.join(work, name))
        if not any(target.startswith(root) for root in roots):
            raise PhaseFailed(
                StopCause(
                    StopKind.BAD_PLAN,
                    f"{p.step}: file {name!r} would be outside its work and log directories",
                )
            )
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(content)
