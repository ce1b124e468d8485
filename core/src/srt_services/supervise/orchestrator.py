"""The orchestrator: execute a Plan phase by phase, supervise it, and tear it down.

Phases run in order (infra, before_workers, workers, frontend, after_frontend, benchmark).
Within a phase units launch in plan order; all instances of a unit start together and are
gated together: a unit with readiness blocks the units after it until every instance
passed, failed, or timed out. A service with ``after`` waits for the services it names
instead (:mod:`srt_services.plan.waits`). Exits arrive as SIGCHLD events and are acted on
at once:

* before readiness: the phase fails, whatever the code (0 included), with the log tail;
* a critical unit after readiness: the job fails and teardown starts;
* a non-critical service: recorded, then restarted per its policy;
* a terminal service: the job ends when all its instances have exited (worst code wins);
* the benchmark: the job ends with its code.

Every path that ends the job goes through :meth:`Orchestrator.request_stop` with a typed
:class:`~srt_services.jobdir.cause.StopCause` (the first one wins), and the one shutdown
coordinator (:mod:`srt_services.supervise.shutdown`) stops tiers in reverse dependency
order. The records this module keeps per unit and instance live in
:mod:`srt_services.supervise.runs`; what it calls (:mod:`~srt_services.supervise.readiness`,
:mod:`~srt_services.supervise.builds`, :mod:`~srt_services.supervise.shutdown`) is handed
what it needs and never imports this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from srt_services.contracts.plan import PHASE_ORDER, Plan, PlannedInstance, PlannedUnit
from srt_services.gcpause import gc_paused
from srt_services.jobdir.cause import StopCause, StopKind, death_signal
from srt_services.jobdir.events import EventLog
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.result import JobResult, write_result
from srt_services.jobdir.state import (
    VERSION,
    InstanceState,
    InstanceStatus,
    JobState,
    JobStatus,
    OrchestratorInfo,
    SessionRecord,
    write_state,
)
from srt_services.jobdir.stop_request import clear_stop_request, take_stop_request
from srt_services.launch import process
from srt_services.launch.children import ChildWatcher
from srt_services.plan.waits import is_chain, phase_waits
from srt_services.supervise.builds import Builder
from srt_services.supervise.control import ControlServer
from srt_services.supervise.portpoll import PortPoller
from srt_services.supervise.probing import InotifyHub
from srt_services.supervise.readiness import Probing
from srt_services.supervise.restart import Action, RestartTracker
from srt_services.supervise.runs import (
    InstanceRun,
    PhaseFailed,
    RunOptions,
    UnitRun,
    describe_code,
)
from srt_services.supervise.scrape_targets import ScrapeTargets
from srt_services.supervise.service_ops import ServiceOps
from srt_services.supervise.shutdown import Shutdown, stop_instances

if TYPE_CHECKING:
    from collections.abc import Mapping

    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.probe import Probe

__all__ = ["Orchestrator", "RunOptions"]

STATE_FLUSH_DELAY = 0.02
#: Signals that stop the job (a second one while stopping: kill at once).
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Orchestrator:
    """Runs one plan in one job directory. Use :meth:`run` (it owns the event loop's signals)."""

    def __init__(
        self,
        plan: Plan,
        job: JobDir,
        launcher: Launcher,
        probes: Mapping[str, Probe],
        options: RunOptions,
    ) -> None:
        self.plan = plan
        self.job = job
        self.launcher = launcher
        #: every probe the plan names, by name
        self.probes = probes
        self.options = options
        self.units: dict[str, UnitRun] = {}
        for u in plan.units:
            run = UnitRun(u)
            run.instances = [InstanceRun(i, run) for i in u.instances]
            self.units[u.name] = run
        self.instances = [i for u in self.units.values() for i in u.instances]
        self.stopping = False
        self.stop_cause: StopCause | None = None
        self.exit_code: int | None = None
        self.kill_now: asyncio.Event | None = None
        self._stop_requested: asyncio.Event | None = None
        self._state_dirty = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.events: EventLog | None = None
        self.watcher: ChildWatcher | None = None
        self.hub: InotifyHub | None = None
        self.poller: PortPoller | None = None
        self.probing: Probing | None = None
        self.control: ControlServer | None = None
        self._base_env: dict[str, str] = {}
        self.started_wall = time.time()
        self._identity = OrchestratorInfo.this_process(self.started_wall)
        self.phase: str | None = None
        self.unkillable: list[str] = []
        self.builds: dict[str, InstanceState] = {}
        #: job files that could not be written (file -> why), reported once each
        self.write_errors: dict[str, str] = {}
        self._final_status: JobStatus | None = None
        self._signals = 0
        #: SIGHUP's disposition before the job (given back when it ends)
        self._sighup: Any = None
        #: ``metrics/targets.json``: the metrics endpoints of the instances that run now
        self.scrape_targets = ScrapeTargets(plan, job.path, self._guarded)

    # ------------------------------------------------------------------ entry point

    def run(self) -> int:
        """Run the job to its end; return its exit code. Blocks."""
        return asyncio.run(self._run())

    async def _run(self) -> int:
        loop = asyncio.get_running_loop()
        stop_requested = self._open(loop)
        driver = asyncio.create_task(self._drive())
        try:
            await stop_requested.wait()
            # From here to the final state the orchestrator allocates little, and a full
            # pass of the cyclic collector over the plan and 200 instances' records costs
            # 15-20 ms: it must not land between the kills and the job's end. Reference
            # counting still frees what the teardown drops; the collector is back on after.
            with gc_paused():
                if not driver.done():
                    driver.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await driver
                await self._teardown()
        finally:
            with gc_paused():
                code = self._close(loop)
        return code

    def _open(self, loop: asyncio.AbstractEventLoop) -> asyncio.Event:
        """Everything the job needs before its first launch; returns the stop event."""
        process.become_subreaper()
        self.kill_now = asyncio.Event()
        self._stop_requested = asyncio.Event()
        self.watcher = ChildWatcher(loop, on_error=self._on_callback_error)
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._on_signal, sig)
        self._sighup = signal.getsignal(signal.SIGHUP)
        if self._sighup != signal.SIG_IGN:  # not under nohup
            loop.add_signal_handler(signal.SIGHUP, self._on_hangup)
        loop.add_signal_handler(signal.SIGUSR1, self._dump_tasks)
        self.events = EventLog(self.job.events_file, self.options.on_event)
        self.events.on_error = self._events_unwritable
        clear_stop_request(self.job)
        try:
            self.hub = InotifyHub(loop)
        except OSError:
            self.hub = None
        self.launcher.attach(self.watcher)
        # the inherited part of every instance's environment, computed once per job
        self._base_env = process.service_env(
            {},
            {
                COOKIE_VAR: self.options.cookie,
                "SRT_JOB_DIR": self.job.path,
                "SRT_JOB_ID": self.plan.job_id,
            },
            self.options.site_passthrough,
        )
        os.makedirs(self.job.logs, exist_ok=True)
        self.scrape_targets.open()
        self.poller = PortPoller(loop)
        self.probing = Probing(
            self.probes,
            self.job,
            self.launcher,
            self._emit,
            self.hub,
            self.poller,
            stop=self._stop_instance,
        )
        self._open_control()
        self.events.emit(
            "job_started",
            job=self.plan.job_name,
            job_id=self.plan.job_id,
            pid=os.getpid(),
            launcher=self.launcher.name,
        )
        self._write_state(status="running")
        return self._stop_requested

    def _open_control(self) -> None:
        """The control socket ``srt restart`` and ``srt stop JOBDIR SERVICE`` talk to."""
        assert self.kill_now is not None
        ops = ServiceOps(
            self.units,
            self.launcher,
            self.options.cookie,
            self._emit,
            relaunch=self._relaunch,
            stopping=lambda: self.stopping,
            kill_now=self.kill_now,
            grace_override=self.options.grace_override,
        )
        describe = f"job {self.plan.job_name}, orchestrator pid {os.getpid()}"
        self.control = ControlServer(self.job, ops.prepare, ops.run, self._emit, describe)
        self.control.open()

    async def _teardown(self) -> None:
        assert self.kill_now is not None
        self.stopping = True
        for inst in self.instances:
            if inst.liveness is not None:
                inst.liveness.cancel()
        shutdown = Shutdown(
            self.instances,
            self.launcher,
            self.options.cookie,
            self.kill_now,
            self._emit,
            grace_override=self.options.grace_override,
            unkillable=self.unkillable,
        )
        await shutdown.run()
        for inst in self.instances:
            if inst.state in ("backoff", "pending"):
                inst.state = "stopped"  # it will never run again: the final state says so
        try:
            await self.launcher.finish()
        except Exception as exc:  # leftover scratch must not turn a finished job into a crash
            self._emit("cleanup_failed", detail=f"{type(exc).__name__}: {exc}")
        # no state write here: _close writes the final one right after, and then lets the
        # launcher release what it holds (the job's empty cgroups)

    def _close(self, loop: asyncio.AbstractEventLoop) -> int:
        """Write how the job ended and release what :meth:`_open` took; return the code."""
        for task in list(self._tasks):
            task.cancel()
        code = self.exit_code if self.exit_code is not None else 1
        self.scrape_targets.close()
        self._final_status = "stopped" if self._by_user else "finished" if code == 0 else "failed"
        self._write_state(status=self._final_status)
        self._write_result(code)
        assert self.events is not None
        assert self.watcher is not None
        self.events.emit(
            "job_finished",
            code=code,
            cause=self.stop_cause.as_json() if self.stop_cause is not None else None,
        )
        # after job_finished: removing a handler costs ~60 µs in asyncio (it lists every
        # valid signal), and a signal now finds the teardown done and changes nothing
        for sig in (*STOP_SIGNALS, signal.SIGHUP, signal.SIGUSR1):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(sig)
        if self._sighup is not None:  # a hang-up after the job must not kill srt either
            with contextlib.suppress(Exception):
                signal.signal(signal.SIGHUP, self._sighup)
        if self.hub is not None:
            self.hub.close()
        if self.control is not None:
            self.control.close()
        self.watcher.close()
        self.events.close()
        # last: removing the job's (empty) cgroups is bookkeeping once every process is gone;
        # the final state still names them, and a cgroup a survivor keeps stays
        self.launcher.close()
        process.become_subreaper(False)
        return code

    # ------------------------------------------------------------------ the job

    async def _drive(self) -> None:
        try:
            await self.launcher.prepare()
            for phase in PHASE_ORDER:
                names = self.plan.phases.get(phase, [])
                if not names:
                    continue
                self.phase = phase
                self._emit("phase_started", phase=phase, units=names)
                await self._start_phase(names)
                self._flush_state()  # milestones are announced after the state file has them
                self._emit("phase_ready", phase=phase)
            self.phase = "serving"
            await self._serve()
        except PhaseFailed as exc:
            self.request_stop(exc.cause, 1)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.request_stop(
                StopCause(
                    StopKind.INTERNAL_ERROR,
                    f"internal error: {exc}",
                    error=f"{type(exc).__name__}: {exc}",
                ),
                1,
            )
            raise

    async def _start_phase(self, names: list[str]) -> None:
        """Start a phase's units, each once the units it waits for are ready.

        Without any ``after`` that is one unit after another, in plan order. With it, every
        unit gets a task that waits for its own predecessors, so a unit that left the chain
        starts as soon as what it names is ready; the first failure cancels the rest.
        """
        planned = {n: self.units[n].planned for n in names}
        if is_chain(names, planned):
            for name in names:
                await self._start_unit(self.units[name])
            return
        waits = phase_waits(names, planned)
        ready = {n: asyncio.Event() for n in names}

        async def start(name: str) -> None:
            for dep in waits[name]:
                await ready[dep].wait()
            await self._start_unit(self.units[name])
            ready[name].set()

        tasks = [asyncio.ensure_future(start(n)) for n in names]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    raise failure
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve(self) -> None:
        terminal = [u for u in self.units.values() if u.planned.terminal and u.instances]
        self._flush_state()
        if not terminal:
            self._emit("serving", detail="running until stopped (Ctrl-C or srt stop)")
        # Ends through request_stop: a benchmark/terminal exit, a failure or a signal.
        await asyncio.Event().wait()

    async def _start_unit(self, unit: UnitRun) -> None:
        u = unit.planned
        if u.external:
            self._emit("external", unit=u.name, address=u.external)
            return
        if not unit.instances:
            return
        if u.restart is not None:
            unit.tracker = RestartTracker(u.restart, clock=time.monotonic)
        if u.build is not None:
            await self._build(u)
        await self._preflight(unit)
        for inst in unit.instances:
            self._launch(inst)
        await self._unit_ready(unit)
        unit.started = True
        if u.timeout and u.category == "benchmark":
            self._spawn_task(self._benchmark_timeout(unit, u.timeout))

    def _builder(self) -> Builder:
        assert self.watcher is not None
        return Builder(
            self.launcher, self.watcher, self.job, self.options.cookie, self._build_event
        )

    async def _build(self, u: PlannedUnit) -> None:
        """Check out and build ``u``'s source; the build shows in state.json meanwhile."""
        try:
            await self._builder().build_source(u)
        except PhaseFailed as exc:
            self._builds_ended(u.name, "failed", exc.cause.code)
            raise
        except asyncio.CancelledError:
            self._builds_ended(u.name, "stopped", None)
            raise

    def _builds_ended(self, unit: str, state: InstanceStatus, code: int | None) -> None:
        """Every build of ``unit`` still running (one per node with ``build_scope: node``)."""
        for step, build in self.builds.items():
            if build.unit == unit:
                self._build_ended(step, state, code)

    def _build_event(self, event: str, /, **fields: Any) -> None:
        self._emit(event, **fields)
        unit = fields.get("unit")
        step = fields.get("step") or f"service_{unit}.build"
        if event == "build_started" and unit:
            self.builds[step] = InstanceState(
                unit, fields.get("node", ""), "starting", None, None, None, time.time(),
                None, 1, 0, None, f"logs/{step}.out", None, {"build": True},
            )  # fmt: skip
            self._mark_state_dirty()
        elif event == "build_done" and unit:
            self._build_ended(step, "exited", 0)

    def _build_ended(self, step: str, state: InstanceStatus, code: int | None) -> None:
        build = self.builds.get(step)
        if build is not None and build.state == "starting":
            build.state = state
            build.exit_code = code
            self._mark_state_dirty()

    async def _preflight(self, unit: UnitRun) -> None:
        """Reap provable leftovers on the unit's ports; fail if anything else holds one."""
        u = unit.planned
        checked = await self.launcher.preflight([i.planned for i in unit.instances])
        for what in checked.reaped:
            self._emit("reaped_leftover", unit=u.name, detail=what)
        if checked.problems:
            raise PhaseFailed(
                StopCause(
                    StopKind.PORT_IN_USE,
                    "cannot start " + u.label + ": " + "; ".join(checked.problems),
                    unit=u.name,
                    detail=tuple(checked.problems),
                )
            )

    async def _unit_ready(self, unit: UnitRun) -> None:
        """Wait until every instance with readiness is ready; the first failure raises."""
        gated = [i for i in unit.instances if i.planned.readiness is not None]
        if gated:
            results = await asyncio.gather(
                *(self._await_ready(i) for i in gated), return_exceptions=True
            )
            for r in results:
                if isinstance(r, BaseException):
                    raise r
        for inst in unit.instances:
            if inst.planned.readiness is None and inst.state == "starting":
                self._mark_ready(inst)
        if unit.planned.fleet is not None:
            assert self.probing is not None
            await self.probing.wait_fleet(unit)

    # ------------------------------------------------------------------ launching

    def _launch(self, inst: InstanceRun) -> None:
        assert self.watcher is not None
        p = inst.planned
        # Plan-made paths: step names are safe tokens, so no realpath walk per launch.
        log_path = os.path.join(self.job.path, p.log)
        env = dict(self._base_env)
        env.update(p.env)
        env[INSTANCE_VAR] = p.step
        env["SRT_NODE"] = p.node
        env["SRT_NODE_IP"] = p.node_ip
        inst.attempt += 1
        inst.exit_fut = asyncio.get_running_loop().create_future()
        inst.exit_code = None
        inst.killed_for = None
        Probing.launching(inst)
        try:
            if _needs_work_dir(p):
                _write_files(p, self.job.logs)  # a full disk fails this attempt like an exec
            handle = self.launcher.launch(p, env, log_path)
        except (OSError, ValueError) as exc:  # ValueError: a NUL a plugin put in argv
            self._cannot_execute(inst, log_path, exc)
            return
        inst.handle = handle
        inst.state = "starting"
        inst.waiting_since = time.monotonic()
        self.watcher.watch(handle.pid, functools.partial(self._on_exit, inst), handle.popen)
        self.scrape_targets.started(p.step)
        self._emit(
            "launched",
            step=p.step,
            unit=p.unit,
            node=p.node,
            pid=handle.pid,
            attempt=inst.attempt,
            log=p.log,
            offset=handle.log_offset,  # where this attempt's output starts (srt logs)
        )
        self._mark_state_dirty()

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
        self._emit("launch_failed", step=p.step, unit=p.unit, node=p.node, error=why)
        asyncio.get_running_loop().call_soon(self._on_exit, inst, 127)

    # ------------------------------------------------------------------ readiness

    async def _await_ready(self, inst: InstanceRun) -> None:
        """Wait for readiness of the current attempt (PhaseFailed if it fails), then mark it."""
        assert self.probing is not None
        await self.probing.wait_ready(inst)
        self._mark_ready(inst)

    def _mark_ready(self, inst: InstanceRun) -> None:
        inst.state = "ready"
        inst.ready_at = time.monotonic()
        p = inst.planned
        waited = inst.ready_at - (inst.waiting_since or inst.ready_at)
        self._emit(
            "ready",
            step=p.step,
            unit=p.unit,
            node=p.node,
            waited=round(waited, 6),
            attempt=inst.attempt,
        )
        self._mark_state_dirty()
        if p.liveness is not None:
            assert self.probing is not None
            inst.liveness = self._spawn_task(self.probing.watch_liveness(inst, p.liveness))

    # ------------------------------------------------------------------ supervision

    def _on_exit(self, inst: InstanceRun, code: int) -> None:
        self._record_exit(inst, code)
        if self.stopping or inst.held is not None:
            inst.state = "stopped"
            return
        was = inst.state
        inst.state = "exited" if code == 0 else "failed"
        if was == "starting" and inst.planned.readiness is not None:
            return  # the readiness wait reports it
        if was == "failed":
            # a wait that gave up on it (a fleet that did not form) stopped it and reports
            # why; on Slurm its exit can arrive before that report does
            return
        u = inst.unit.planned
        if u.category == "benchmark":
            self._benchmark_exited(inst, code)
        elif u.terminal:
            self._terminal_exited(inst, code)
        elif u.critical:
            self._critical_exited(inst, code)
        else:
            self._after_noncritical_exit(inst, code)

    def _record_exit(self, inst: InstanceRun, code: int) -> None:
        if inst.handle is not None:
            inst.handle.returncode = code
        inst.exit_code = code
        if inst.exit_fut is not None and not inst.exit_fut.done():
            inst.exit_fut.set_result(code)
        if inst.liveness is not None:
            inst.liveness.cancel()
            inst.liveness = None
        p = inst.planned
        self.scrape_targets.stopped(p.step)
        self._emit(
            "exited",
            step=p.step,
            unit=p.unit,
            node=p.node,
            code=code,
            signal=death_signal(code),
            attempt=inst.attempt,
        )
        self._mark_state_dirty()

    def _benchmark_exited(self, inst: InstanceRun, code: int) -> None:
        """The benchmark's exit ends the job with its code."""
        reason = "benchmark finished" if code == 0 else f"benchmark failed ({describe_code(code)})"
        cause = StopCause.process_exit(
            StopKind.BENCHMARK_EXIT, code, reason, unit=inst.unit.name, node=inst.planned.node
        )
        self.request_stop(cause, code)

    def _terminal_exited(self, inst: InstanceRun, code: int) -> None:
        """A terminal critical service that failed ends the job; otherwise the job ends
        when every terminal instance has exited."""
        if inst.unit.planned.critical and code != 0:
            p = inst.planned
            message = f"terminal critical {inst.label} failed on {p.node} ({describe_code(code)})"
            self.request_stop(_critical_exit(inst, code, message), code)
            return
        self._check_terminal_done()

    def _critical_exited(self, inst: InstanceRun, code: int) -> None:
        """A critical unit exited after it was ready: the job fails."""
        p = inst.planned
        why = f" ({inst.killed_for})" if inst.killed_for else ""
        message = (
            f"critical {inst.label} exited on {p.node} after it was ready"
            f" ({describe_code(code)}){why}"
        )
        self.request_stop(_critical_exit(inst, code, message, inst.killed_for), 1)

    def _after_noncritical_exit(self, inst: InstanceRun, code: int) -> None:
        unit = inst.unit
        p = inst.planned
        if unit.tracker is None:
            return
        ran_for = time.monotonic() - (inst.handle.started_mono if inst.handle else time.monotonic())
        decision = unit.tracker.on_exit(code, ran_for)
        if decision.action is Action.GIVE_UP:
            inst.state = "unhealthy"
            self._emit("unhealthy", step=p.step, unit=p.unit, node=p.node, detail=decision.reason)
            return
        if decision.action is not Action.RESTART:
            return
        inst.state = "backoff"
        self._emit(
            "restarting",
            step=p.step,
            unit=p.unit,
            node=p.node,
            delay=round(decision.delay, 6),
            attempt=inst.attempt + 1,
        )
        self._spawn_task(self._restart_later(inst, decision.delay, inst.attempt))

    async def _restart_later(self, inst: InstanceRun, delay: float, attempt: int) -> None:
        await asyncio.sleep(delay)
        # not if it was restarted or stopped on request meanwhile (srt restart / srt stop)
        if inst.attempt == attempt and inst.state == "backoff":
            await self._relaunch(inst)

    async def _relaunch(self, inst: InstanceRun) -> None:
        """Start an instance again (restart policy, ``srt restart``): launch, readiness; a
        failed readiness is an exit, or for a critical unit (a forced restart) the job's end."""
        if self.stopping:
            return
        inst.restarts += 1
        self._launch(inst)
        if inst.planned.readiness is None:
            self._mark_ready(inst)
            return
        try:
            await self._await_ready(inst)
        except PhaseFailed as exc:
            if inst.held is not None or self.stopping:
                return  # stopped on request (or by the teardown) while it was starting
            if inst.unit.planned.critical:
                self.request_stop(exc.cause, 1)
                return
            self._emit(
                "restart_failed",
                step=inst.step,
                unit=inst.planned.unit,
                detail=str(exc).splitlines()[0],
            )
            if inst.running:
                await self._stop_instance(inst, "restart failed")
            if inst.exit_fut is not None:
                code = await inst.exit_fut
                if not self.stopping:
                    self._after_noncritical_exit(inst, code)

    def _check_terminal_done(self) -> None:
        terminal = [i for u in self.units.values() if u.planned.terminal for i in u.instances]
        if not terminal or any(i.exit_code is None for i in terminal):
            return
        worst = max((i.exit_code or 0) for i in terminal)
        detail = (
            "terminal services finished"
            if worst == 0
            else f"terminal services failed (worst {describe_code(worst)})"
        )
        self.request_stop(StopCause(StopKind.TERMINAL_EXIT, detail, code=worst), worst)

    async def _benchmark_timeout(self, unit: UnitRun, timeout: float) -> None:
        await asyncio.sleep(timeout)
        inst = unit.instances[0]
        if inst.running and self.launcher is not None and inst.handle is not None:
            inst.killed_for = f"benchmark timeout after {timeout:g}s"
            self._emit("timeout", step=inst.step, timeout=timeout)
            self.request_stop(
                StopCause(StopKind.BENCHMARK_TIMEOUT, inst.killed_for, timeout=timeout), 124
            )

    # ------------------------------------------------------------------ stopping

    async def _stop_instance(self, inst: InstanceRun, reason: str) -> None:
        """One instance, while the job goes on: SIGTERM, its grace, SIGKILL."""
        assert self.kill_now is not None
        grace = self.options.grace_override
        if grace is None:
            grace = inst.unit.planned.stop_grace
        await stop_instances(
            [inst],
            self.launcher,
            self.launcher.stop_budget(grace),
            self.kill_now,
            self._emit,
            reason,
        )

    def request_stop(self, cause: StopCause, code: int) -> None:
        """The one entry to ending the job; the first cause wins and ``code`` with it."""
        if self.stop_cause is None:
            self.stop_cause = cause
            self.exit_code = code
            self._emit(
                "stop_requested",
                cause=cause.as_json(with_message=False),
                code=code,
                detail=cause.message,
            )
        self.stopping = True
        if self._stop_requested is not None:
            self._stop_requested.set()

    def _on_signal(self, sig: int) -> None:
        # act first, report second: reporting may fail (a closed terminal), acting may not
        self._signals += 1
        name = signal.Signals(sig).name
        if self._signals > 1 and self.stopping:
            assert self.kill_now is not None
            self.kill_now.set()
            self._emit("signal", signal=name, detail="second signal: killing everything now")
            return
        request = take_stop_request(self.job, self.options.cookie)
        if request is not None:
            self.request_stop(request.cause(name), self._user_stop_code(sig))
        else:
            self.request_stop(
                StopCause(StopKind.SIGNAL, f"received {name}", signal=name), 128 + sig
            )
        self._emit("signal", signal=name, by=request.who if request is not None else None)

    @property
    def _by_user(self) -> bool:
        return self.stop_cause is not None and self.stop_cause.kind is StopKind.USER_STOP

    def _user_stop_code(self, sig: int) -> int:
        """0 when stopping is how this job ends well: it was serving and has no benchmark or
        terminal service of its own to finish; otherwise 128+N, as for any signal (its work
        was cut short, and ``srt run ... && next`` must not go on). See the user guide."""
        finishes = any(
            u.instances and (u.planned.terminal or u.planned.category == "benchmark")
            for u in self.units.values()
        )
        return 0 if self.phase == "serving" and not finishes else 128 + sig

    def _on_hangup(self) -> None:
        """SIGHUP: the terminal went away (an SSH session dropped, a closed window). The job
        goes on and ends as it would have with the terminal there; its output goes nowhere.
        ``srt stop``, SIGTERM or SIGINT end it."""
        self._emit("signal", signal="SIGHUP", detail="the terminal hung up; the job goes on")

    # ------------------------------------------------------------------ bookkeeping

    def _dump_tasks(self) -> None:
        """SIGUSR1: write every pending coroutine's stack to ``debug-tasks.txt`` (hangs)."""
        import io

        out = io.StringIO()
        for task in asyncio.all_tasks():
            out.write(f"--- {task!r}\n")
            task.print_stack(file=out)
        with (
            contextlib.suppress(OSError),
            open(self.job.file("debug-tasks.txt"), "w", encoding="utf-8") as fh,
        ):
            fh.write(out.getvalue())

    def _spawn_task(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[None]) -> None:
        """A background task (a restart, a liveness watch) that raised ends the job loudly:
        a failure there must never leave a service silently down."""
        self._tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self._fail_internally(exc, f"in {task.get_coro().__qualname__}")  # type: ignore[union-attr]

    def _on_callback_error(self, pid: int, exc: BaseException) -> None:
        """An exit callback raised (the SIGCHLD path): fail the unit, and the job, loudly."""
        step = next((i.step for i in self.instances if i.handle and i.handle.pid == pid), None)
        self._fail_internally(
            exc, f"handling the exit of pid {pid}" + (f" ({step})" if step else "")
        )

    def _fail_internally(self, exc: BaseException, where: str) -> None:
        self._emit("internal_error", detail=f"{where}: {type(exc).__name__}: {exc}")
        self.request_stop(
            StopCause(
                StopKind.INTERNAL_ERROR,
                f"internal error {where}: {exc}",
                error=f"{type(exc).__name__}: {exc}",
            ),
            1,
        )

    def _emit(self, event: str, /, **fields: Any) -> None:
        if self.events is not None:
            self.events.emit(event, **fields)

    def _mark_state_dirty(self) -> None:
        if self._state_dirty:
            return
        self._state_dirty = True
        # a little later rather than at once: a burst of launches or exits is one write,
        # and a teardown's signals go out before the state file is rewritten
        asyncio.get_running_loop().call_later(STATE_FLUSH_DELAY, self._flush_state)

    def _flush_state(self) -> None:
        self._state_dirty = False
        if self._final_status is not None:
            return  # a timer firing while asyncio.run winds down must not undo the final state
        self.scrape_targets.flush_pending()
        self._write_state(status="stopping" if self.stopping else "running")

    def _write_state(self, status: JobStatus) -> None:
        self._guarded("state.json", lambda: write_state(self.job, self._state(status)))

    def _state(self, status: JobStatus) -> JobState:
        state = JobState(
            version=VERSION,
            job_name=self.plan.job_name,
            job_id=self.plan.job_id,
            cookie=self.options.cookie,
            launcher=self.launcher.name,
            status=status,
            phase=self.phase,
            orchestrator=self._identity,
            instances={inst.step: _instance_state(inst) for inst in self.instances},
            cause=self.stop_cause,
            unkillable=self.unkillable,
        )
        state.cgroup = self.launcher.cgroup_path()
        state.sessions = [
            SessionRecord(sid, step) for sid, step in self.launcher.sessions().items()
        ]
        if self.builds:
            self._fill_build_pids(self.launcher.sessions())
        state.builds = self.builds
        return state

    def _guarded(self, what: str, write: Callable[[], None]) -> bool:
        """Write a job file; a failure (ENOSPC, a read-only remount) is reported once and
        the job goes on with its state in memory, rewritten at the next change."""
        try:
            write()
        except OSError as exc:
            if what not in self.write_errors:
                self.write_errors[what] = exc.strerror or str(exc)
                self._emit(
                    "job_dir_error",
                    detail=f"cannot write {what} in {self.job.path}: {exc.strerror};"
                    " the job goes on with its state in memory",
                )
            return False
        if self.write_errors.pop(what, None) is not None:
            self._emit("job_dir_recovered", detail=f"{what} written again")
        return True

    def _events_unwritable(self, exc: OSError) -> None:
        if "events.jsonl" not in self.write_errors:
            self.write_errors["events.jsonl"] = exc.strerror or str(exc)
            self._emit(
                "job_dir_error",
                detail=f"cannot write events.jsonl in {self.job.path}: {exc.strerror};"
                " the job goes on with its state in memory",
            )

    def _last_write(self, what: str, write: Callable[[], None]) -> None:
        """The final state and result: if the disk is full, give back the space set aside
        when the job started, and try again."""
        if self._guarded(what, write):
            return
        if self.options.reserve is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.options.reserve)
            self._guarded(what, write)

    def _fill_build_pids(self, sessions: dict[int, str]) -> None:
        """A running build's PID is the newest session the launcher started for its step."""
        for step, build in self.builds.items():
            if build.state != "starting":
                continue
            pids = [pid for pid, s in sessions.items() if s == step]
            if pids and pids[-1] != build.pid:
                build.pid = build.pgid = pids[-1]
                build.start_ticks = process.start_ticks(pids[-1])

    def _write_result(self, code: int) -> None:
        result = JobResult(
            job_name=self.plan.job_name,
            job_id=self.plan.job_id,
            exit_code=code,
            status="stopped" if self._by_user else "succeeded" if code == 0 else "failed",
            cause=self.stop_cause,
            started=self.started_wall,
            ended=time.time(),
            unkillable=self.unkillable,
        )
        self._last_write("result.json", lambda: write_result(self.job, result))
        if "state.json" in self.write_errors and self._final_status is not None:
            final = self._final_status
            self._last_write("state.json", lambda: write_state(self.job, self._state(final)))


def _instance_state(inst: InstanceRun) -> InstanceState:
    p = inst.planned
    h = inst.handle
    if h is not None and h.start_ticks is None and h.returncode is None:
        # read once, in the first write after the launch (see ``process.spawn``)
        h.start_ticks = process.start_ticks(h.pid)
    # Positional, in InstanceState's field order: this runs for every instance on every
    # state write, and a keyword call costs about twice as much.
    return InstanceState(
        p.unit,
        p.node,
        inst.state,
        h.pid if h else None,
        h.pgid if h else None,
        h.start_ticks if h else None,
        h.started_wall if h else None,
        inst.ready_at,
        inst.attempt,
        inst.restarts,
        inst.exit_code,
        p.log,
        p.readiness.describe if p.readiness else None,
        h.extra if h else {},
    )


def _needs_work_dir(p: PlannedInstance) -> bool:
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


def _write_files(p: PlannedInstance, log_dir: str) -> None:
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


def _critical_exit(
    inst: InstanceRun, code: int, message: str, reason: str | None = None
) -> StopCause:
    """A critical instance's exit as the job's stop cause (where: its unit, step and node)."""
    p = inst.planned
    return StopCause.process_exit(
        StopKind.CRITICAL_SERVICE_EXIT,
        code,
        message,
        unit=inst.unit.name,
        step=p.step,
        node=p.node,
        reason=reason,
    )
