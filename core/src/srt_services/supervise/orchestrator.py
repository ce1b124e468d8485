"""The orchestrator: execute a Plan phase by phase, supervise it, and tear it down.

Phases run in order (infra, before_workers, workers, frontend, after_frontend, benchmark).
Within a phase units launch in plan order; all instances of a unit start together and are
gated together: a unit with readiness blocks the units after it until every instance
passed, failed, or timed out. A service with ``after`` waits for the services it names
instead (:mod:`srt_services.plan.waits`). Exits arrive as SIGCHLD events and are acted on
at once (:mod:`.exits`).

Every path that ends the job goes through :meth:`Orchestrator.request_stop` with a typed
:class:`~srt_services.jobdir.cause.StopCause` (the first one wins), and the one shutdown
coordinator (:mod:`.shutdown`) stops tiers in reverse dependency order.

This module holds the job's life cycle (open, the phases, serving, the end); the rest is
done by collaborators, each in its own module, handed what they need and never importing
this one: the job's record (:mod:`.journal`), launching (:mod:`.launching`), readiness
(:mod:`.readiness`), exits (:mod:`.exits`), restarts (:mod:`.restarting`), source builds
(:mod:`.builds`), signals (:mod:`.signals`), the control socket (:mod:`.control`,
:mod:`.service_ops`) and the teardown (:mod:`.shutdown`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from srt_services.contracts.launcher import LaunchFailed
from srt_services.contracts.plan import PHASE_ORDER, Plan, PlannedUnit
from srt_services.gcpause import gc_paused
from srt_services.jobdir.cause import StopCause, StopKind
from srt_services.jobdir.identity import COOKIE_VAR
from srt_services.jobdir.layout import JobDir
from srt_services.jobdir.stop_request import clear_stop_request, take_stop_request
from srt_services.launch import process
from srt_services.launch.children import ChildWatcher
from srt_services.plan.waits import is_chain, phase_waits
from srt_services.supervise.builds import Builder
from srt_services.supervise.control import ControlServer
from srt_services.supervise.exits import Exits
from srt_services.supervise.journal import Journal
from srt_services.supervise.launching import Launching
from srt_services.supervise.logclock import LogClock
from srt_services.supervise.portpoll import PortPoller
from srt_services.supervise.probing import InotifyHub
from srt_services.supervise.readiness import Probing, ReadinessGate
from srt_services.supervise.restart import RestartTracker
from srt_services.supervise.restarting import Restarts
from srt_services.supervise.runs import JobRun, PhaseFailed, RunOptions, UnitRun
from srt_services.supervise.service_ops import ServiceOps
from srt_services.supervise.shutdown import Shutdown, stop_instances
from srt_services.supervise.signals import Signals, absorb_late_stops

if TYPE_CHECKING:
    from collections.abc import Mapping

    from srt_services.contracts.launcher import Launcher
    from srt_services.contracts.probe import Probe
    from srt_services.supervise.runs import InstanceRun

__all__ = ["Orchestrator", "RunOptions"]


class Orchestrator:
    """Runs one plan in one job directory with one launcher. Use :meth:`run` (it owns the
    event loop's signals)."""

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
        self.run_state = JobRun.of(plan)
        self.units = self.run_state.units
        self.instances = self.run_state.instances
        self.journal = Journal(job, self.run_state, launcher, options)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._stop_requested: asyncio.Event | None = None
        #: set by a second stop signal: the teardown skips its graces
        self.kill_now: asyncio.Event | None = None
        self.watcher: ChildWatcher | None = None
        self.hub: InotifyHub | None = None
        self.control: ControlServer | None = None
        #: the signals' dispositions before the job (given back when it ends)
        self._dispositions: dict[int, Any] = {}
        self._clock: LogClock | None = None
        # built in _open, once the event loop runs
        self._launching: Launching | None = None
        self._gate: ReadinessGate | None = None
        self._restarts: Restarts | None = None

    # ------------------------------------------------------------------ what others read

    @property
    def stop_cause(self) -> StopCause | None:
        return self.run_state.stop_cause

    @property
    def unkillable(self) -> list[str]:
        return self.run_state.unkillable

    @property
    def stopping(self) -> bool:
        return self.run_state.stopping

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
        emit = self.journal.emit
        self._signals = Signals(
            self.run_state, self.job, self.options.cookie, emit, self.request_stop, self.kill_now
        )
        self._dispositions = self._signals.install(loop)
        self.journal.open()
        clear_stop_request(self.job)
        try:
            self.hub = InotifyHub(loop)
        except OSError:
            self.hub = None
        self.launcher.attach(self.watcher, _Notices(self))
        # the inherited part of every instance's environment, computed once per job
        base_env = process.service_env(
            {},
            {
                COOKIE_VAR: self.options.cookie,
                "SRT_JOB_DIR": self.job.path,
                "SRT_JOB_ID": self.plan.job_id,
            },
            (*self.options.site_passthrough, *self.plan.env_passthrough),
        )
        os.makedirs(self.job.logs, exist_ok=True)
        probing = Probing(
            self.probes,
            self.job,
            self.launcher,
            emit,
            self.hub,
            PortPoller(loop),
            stop=self._stop_instance,
        )
        self._gate = ReadinessGate(probing, emit, self.journal.mark_dirty, self._spawn_task)
        exits = Exits(self.run_state, self.journal, self.request_stop, self._after_noncritical)
        self._launching = Launching(
            self.job, self.launcher, self.watcher, self.journal, base_env, exits.on_exit
        )
        self._restarts = Restarts(
            self.run_state,
            self.journal,
            self._launching.launch,
            self._gate,
            self.request_stop,
            self._stop_instance,
            self._spawn_task,
        )
        self._open_control()
        logs = sorted({i.planned.log for i in self.instances})
        self._clock = LogClock(self.job.path, lambda: logs)
        self._clock.start(loop)
        emit(
            "job_started",
            job=self.plan.job_name,
            job_id=self.plan.job_id,
            pid=os.getpid(),
            launcher=self.launcher.name,
            **self._network_fields(),
        )
        self.journal.write_state("running")
        return self._stop_requested

    def _network_fields(self) -> dict[str, Any]:
        """A local job's network mode, for ``job_started`` (``events.jsonl``)."""
        net = self.plan.local_network
        if net is None:
            return {}
        out: dict[str, Any] = {"local_network": net.mode}
        if net.mode == "namespaces":
            out["bridge"] = net.bridge
            out["subnet"] = net.subnet
        return out

    def _after_noncritical(self, inst: InstanceRun, code: int) -> None:
        assert self._restarts is not None
        self._restarts.after_exit(inst, code)

    def _open_control(self) -> None:
        """The control socket ``srt restart`` and ``srt stop JOBDIR SERVICE`` talk to."""
        assert self.kill_now is not None
        assert self._restarts is not None
        ops = ServiceOps(
            self.units,
            self.launcher,
            self.options.cookie,
            self.journal.emit,
            relaunch=self._restarts.relaunch,
            stopping=lambda: self.stopping,
            kill_now=self.kill_now,
            grace_override=self.options.grace_override,
        )
        describe = f"job {self.plan.job_name}, orchestrator pid {os.getpid()}"
        self.control = ControlServer(self.job, ops.prepare, ops.run, self.journal.emit, describe)
        self.control.open()

    async def _teardown(self) -> None:
        assert self.kill_now is not None
        self.run_state.stopping = True
        for inst in self.instances:
            if inst.liveness is not None:
                inst.liveness.cancel()
        shutdown = Shutdown(
            self.instances,
            self.launcher,
            self.options.cookie,
            self.kill_now,
            self.journal.emit,
            grace_override=self.options.grace_override,
            unkillable=self.run_state.unkillable,
        )
        await shutdown.run()
        for inst in self.instances:
            if inst.state in ("backoff", "pending"):
                inst.state = "stopped"  # it will never run again: the final state says so
        try:
            await self.launcher.finish()
        except Exception as exc:  # leftover scratch must not turn a finished job into a crash
            self.journal.emit("cleanup_failed", detail=f"{type(exc).__name__}: {exc}")
        for what in self.launcher.unkillable():
            self.run_state.unkillable.append(what)
            self.journal.emit("unkillable", detail=what)
        # no state write here: _close writes the final one right after, and then lets the
        # launcher release what it holds (the job's empty cgroups)

    def _close(self, loop: asyncio.AbstractEventLoop) -> int:
        """Write how the job ended and release what :meth:`_open` took; return the code."""
        for task in list(self._tasks):
            task.cancel()
        code = self.run_state.exit_code if self.run_state.exit_code is not None else 1
        if self._clock is not None:
            self._clock.close()
        self.journal.finish(code)
        late = (
            absorb_late_stops(self.job, self.options.cookie)
            if self.options.absorb_late_stops
            else None
        )
        Signals.remove(loop, self._dispositions, late)
        # a stop that came after the end was decided (its signal handled by now, or still
        # on its way to the handler above) leaves no request behind
        take_stop_request(self.job, self.options.cookie)
        if self.hub is not None:
            self.hub.close()
        if self.control is not None:
            self.control.close()
        assert self.watcher is not None
        self.watcher.close()
        self.journal.close()
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
                self.run_state.phase = phase
                self.journal.emit("phase_started", phase=phase, units=names)
                await self._start_phase(names)
                self.journal.flush()  # milestones are announced after the state file has them
                self.journal.emit("phase_ready", phase=phase)
            self.run_state.phase = "serving"
            await self._serve()
        except PhaseFailed as exc:
            self.request_stop(exc.cause, 1)
        except LaunchFailed as exc:
            self.request_stop(StopCause(StopKind.LAUNCHER_FAILED, str(exc), node=exc.node), 1)
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
        self.journal.flush()
        if not terminal:
            self.journal.emit("serving", detail="running until stopped (Ctrl-C or srt stop)")
        # Ends through request_stop: a benchmark/terminal exit, a failure or a signal.
        await asyncio.Event().wait()

    async def _start_unit(self, unit: UnitRun) -> None:
        assert self._launching is not None
        assert self._gate is not None
        u = unit.planned
        if u.external:
            self.journal.emit("external", unit=u.name, address=u.external)
            return
        if not unit.instances:
            return
        if u.restart is not None:
            unit.tracker = RestartTracker(u.restart, clock=time.monotonic)
        if u.build is not None:
            await self._build(u)
        await self._preflight(unit)
        for inst in unit.instances:
            self._launching.launch(inst)
        await self._gate.unit_ready(unit)
        unit.started = True
        if u.timeout and u.category == "benchmark":
            self._spawn_task(self._benchmark_timeout(unit, u.timeout))

    async def _build(self, u: PlannedUnit) -> None:
        """Check out and build ``u``'s source; the build shows in state.json meanwhile."""
        assert self.watcher is not None
        journal = self.journal
        builder = Builder(
            self.launcher, self.watcher, self.job, self.options.cookie, journal.build_event
        )
        try:
            await builder.build_source(u)
        except PhaseFailed as exc:
            journal.builds_ended(u.name, "failed", exc.cause.code)
            raise
        except asyncio.CancelledError:
            journal.builds_ended(u.name, "stopped", None)
            raise

    async def _preflight(self, unit: UnitRun) -> None:
        """Reap provable leftovers on the unit's ports; fail if anything else holds one."""
        u = unit.planned
        checked = await self.launcher.preflight([i.planned for i in unit.instances])
        for what in checked.reaped:
            self.journal.emit("reaped_leftover", unit=u.name, detail=what)
        if checked.problems:
            raise PhaseFailed(
                StopCause(
                    StopKind.PORT_IN_USE,
                    "cannot start " + u.label + ": " + "; ".join(checked.problems),
                    unit=u.name,
                    detail=tuple(checked.problems),
                )
            )

    async def _benchmark_timeout(self, unit: UnitRun, timeout: float) -> None:
        await asyncio.sleep(timeout)
        inst = unit.instances[0]
        if inst.running and inst.handle is not None:
            inst.killed_for = f"benchmark timeout after {timeout:g}s"
            self.journal.emit("timeout", step=inst.step, timeout=timeout)
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
            self.journal.emit,
            reason,
        )

    def request_stop(self, cause: StopCause, code: int) -> None:
        """The one entry to ending the job; the first cause wins and ``code`` with it."""
        run = self.run_state
        if run.stop_cause is None:
            run.stop_cause = cause
            run.exit_code = code
            self.journal.emit(
                "stop_requested",
                cause=cause.as_json(with_message=False),
                code=code,
                detail=cause.message,
            )
        run.stopping = True
        if self._stop_requested is not None:
            self._stop_requested.set()

    # ------------------------------------------------------------------ background work

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
        self.journal.emit("internal_error", detail=f"{where}: {type(exc).__name__}: {exc}")
        self.request_stop(
            StopCause(
                StopKind.INTERNAL_ERROR,
                f"internal error {where}: {exc}",
                error=f"{type(exc).__name__}: {exc}",
            ),
            1,
        )


class _Notices:
    """What the launcher tells the runtime between calls (see
    :class:`~srt_services.contracts.launcher.LaunchNotices`): a remote PID became known
    (the state is rewritten), a log grew on a node (its probes wake up), a callback raised
    (the job fails loudly, as for an exit heard through SIGCHLD)."""

    def __init__(self, orch: Orchestrator) -> None:
        self._orch = orch

    def state_changed(self) -> None:
        self._orch.journal.mark_dirty()

    def file_changed(self, path: str) -> None:
        if self._orch.hub is not None:
            self._orch.hub.poke(path)

    def callback_failed(self, what: str, error: BaseException) -> None:
        self._orch._fail_internally(error, what)
