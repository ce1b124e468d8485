"""``srt run``: a recipe loaded, planned, its job directory prepared, and the plan
supervised to its end.

The flow is one way: the composition root loads the recipe and asks the launcher for the
allocation; the planner returns the final plan; this module writes it into the job
directory, builds the launcher and the probe table the plan names, and hands plan, job
directory and launcher to the orchestrator. How progress and the outcome read on a
terminal is the CLI's (:mod:`srt_services.cli.run_views`); this module returns the facts.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from srt_services.app import compose
from srt_services.errors import SrtError
from srt_services.jobdir.identity import new_cookie
from srt_services.jobdir.layout import RESULT, STATE, JobDir, atomic_write, default_job_dir
from srt_services.jobdir.lock import JobLock
from srt_services.jobdir.view import JobView
from srt_services.launch import netns
from srt_services.launch.cgroup import JobCgroup
from srt_services.launch.process import tail
from srt_services.supervise.recovery import Log, stop_leftovers

if TYPE_CHECKING:
    from srt_services.app.compose import Setup
    from srt_services.contracts.plan import LocalNetwork, Plan
    from srt_services.contracts.probe import Probe
    from srt_services.jobdir.cause import StopCause
    from srt_services.plugins.manager import PluginSet

#: Lines of the benchmark's (or the terminal services') logs the outcome quotes.
SUMMARY_TAIL = 8
#: Space set aside in the job directory when the job starts, given back to write the
#: final state and result.json if the disk fills up meanwhile.
RESERVE = ".srt-reserve"
RESERVE_BYTES = 256 * 1024


@dataclass(frozen=True, slots=True)
class RunRequest:
    recipe: str
    job_dir: str | None = None
    #: virtual nodes (``--nodes``); default: what the recipe needs
    nodes: int | None = None
    launcher: str = "local"
    #: replaces every SIGTERM-to-SIGKILL grace (``--grace``)
    grace: float | None = None
    #: the job of another tool's sweep file to run (its selector)
    variant: str | None = None
    #: ``--local-network``: ``auto``, ``shared`` or ``namespaces`` (``None``: the site's)
    local_network: str | None = None


@dataclass(frozen=True, slots=True)
class LogTail:
    #: relative to the job directory
    log: str
    lines: list[str]


@dataclass(slots=True)
class RunResult:
    job_dir: str
    job_name: str
    #: the exit status of ``srt run``
    code: int
    stop_cause: StopCause | None
    #: processes that outlived SIGKILL, as the teardown reported them
    unkillable: list[str] = field(default_factory=list)
    #: what the job's own end said last: the benchmark's or the terminal services' logs
    tails: list[LogTail] = field(default_factory=list)


Events = Callable[[dict[str, Any]], None]


def run_job(
    where: Setup, request: RunRequest, on_event: Events, note: Callable[[str], None]
) -> RunResult:
    """Run the recipe on this machine until the job ends.

    ``on_event`` receives every job event (the progress display); ``note`` a line for the
    user before the job starts (warnings, what a previous run left). Refusals raise
    :class:`~srt_services.errors.SrtError` (or a recipe error) before any process starts.
    """
    survive_hangups()
    loaded = compose.load(where, request.recipe, variant=request.variant)
    launcher_cls = where.plugins.launcher_class(request.launcher)
    job, lock = prepare_job_dir(request.job_dir or default_job_dir(loaded.recipe.name), note)
    try:
        from srt_services.contracts.allocation import AllocationRequest

        nodes = AllocationRequest(
            kind="local",
            count=request.nodes,
            job_id=os.path.basename(job.path),
            job_dir=job.path,
        )
        planned = compose.plan(
            where,
            loaded,
            nodes,
            job_dir=job.path,
            launcher=launcher_cls,
            runs_here=True,
            local_network=request.local_network,
        )
        plan = planned.plan
        for message in plan.warnings:
            note("warning: " + message)
        if plan.local_network is not None:
            note(network_line(plan.local_network))
        _record(job, plan, request.recipe)
        for w in loaded.warnings:
            note("warning: " + w.render(request.recipe))
        return supervise(where, plan, job, launcher_cls, request.grace, on_event)
    finally:
        lock.release()


def network_line(net: LocalNetwork) -> str:
    """What ``srt run`` says about the local network mode it used."""
    if net.mode != "namespaces":
        return f"local network: shared, virtual nodes on 127.0.0.x ({net.why})"
    nodes = ", ".join(f"{n} {a}" for n, a in net.addresses.items())
    text = f"local network: namespaces ({net.why}); bridge {net.bridge} {net.subnet}: {nodes}"
    for f in net.forwards:
        text += f"; 127.0.0.1:{f['port']} forwarded to {f['unit']} on {f['node']}"
    return text


def supervise(
    where: Setup,
    plan: Plan,
    job: JobDir,
    launcher_cls: Any,
    grace: float | None,
    on_event: Events,
) -> RunResult:
    """Hand the final plan, the job directory and a launcher to the orchestrator."""
    from srt_services.supervise.orchestrator import Orchestrator, RunOptions

    cookie = new_cookie()
    launcher = launcher_cls(plan, job.path, compose.launch_settings(where, cookie))
    orch = Orchestrator(
        plan,
        job,
        launcher,
        probe_table(plan, where.plugins),
        RunOptions(
            cookie=cookie,
            site_passthrough=tuple(where.site.env_passthrough),
            grace_override=grace,
            on_event=on_event,
            reserve=job.file(RESERVE),
            absorb_late_stops=True,
        ),
    )
    code = orch.run()
    return RunResult(
        job_dir=job.path,
        job_name=plan.job_name,
        code=code,
        stop_cause=orch.stop_cause,
        unkillable=list(orch.unkillable),
        tails=_tails(plan, job),
    )


def probe_table(plan: Plan, plugins: PluginSet) -> Mapping[str, Probe]:
    """Every probe the plan names, looked up once: the runtime never asks the plugins."""
    names: set[str] = set()
    for unit in plan.units:
        if unit.fleet is not None:
            names.add(unit.fleet.probe)
        for inst in unit.instances:
            for probe in (inst.readiness, inst.liveness):
                if probe is not None:
                    names.add(probe.probe)
    return {name: plugins.probe(name) for name in sorted(names)}


def _record(job: JobDir, plan: Plan, recipe: str) -> None:
    """The plan and a copy of the recipe, in the job directory before anything starts."""
    try:
        atomic_write(job.plan_file, plan.to_json(indent=True))
        copy = job.file("recipe" + (os.path.splitext(recipe)[1] or ".yaml"))
        if not os.path.exists(copy) or not os.path.samefile(recipe, copy):
            shutil.copyfile(recipe, copy)
    except OSError as exc:
        raise SrtError(f"cannot write in the job directory {job.path}: {exc.strerror}") from None


def _tails(plan: Plan, job: JobDir) -> list[LogTail]:
    """The last lines of the benchmark's or the terminal services' first logs."""
    out = []
    ends = [u for u in plan.units if u.category == "benchmark" or u.terminal]
    for unit in ends[:3]:
        for inst in unit.instances[:2]:
            lines = tail(os.path.join(job.path, inst.log), SUMMARY_TAIL)
            if lines:
                out.append(LogTail(inst.log, lines))
    return out


def prepare_job_dir(path: str, log: Log) -> tuple[JobDir, JobLock]:
    """Create and lock the job directory; clean up after a dead orchestrator that used it.

    Refused, before anything starts, when the directory cannot be written (read-only, no
    space, no permission) or another ``srt run`` holds it.
    """
    job = JobDir(os.path.abspath(path))
    try:
        os.makedirs(job.path, exist_ok=True)
        lock = JobLock(job.path)
        lock.acquire()
    except OSError as exc:
        raise SrtError(f"cannot use {job.path} as a job directory: {exc.strerror}") from None
    try:
        _take_over(job, path, log)
        job.create()
        with open(job.file(RESERVE), "wb") as fh:
            fh.write(b"\0" * RESERVE_BYTES)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:
        lock.release()
        raise SrtError(f"cannot write in the job directory {job.path}: {exc.strerror}") from None
    except BaseException:
        lock.release()
        raise
    return job, lock


def _take_over(job: JobDir, path: str, log: Log) -> None:
    """Stop what a previous run of this directory left, and set its files aside."""
    if not os.path.exists(job.state_file):
        return
    view = JobView.read(job.path)
    assert view.state is not None
    elsewhere = view.state.orchestrator.elsewhere()
    if elsewhere is not None and "rebooted" not in elsewhere and not view.state.finished:
        raise SrtError(
            f"{job.path} holds a job whose orchestrator (pid {view.state.orchestrator.pid})"
            f" {elsewhere}: its processes cannot be checked from here; use another --job-dir"
        )
    if view.orchestrator_alive():  # holds no lock: an srt from before the lock existed
        pid = view.orchestrator_pid
        raise SrtError(
            f"{job.path} belongs to a running job (orchestrator pid {pid}); use `srt stop {path}` first"
        )
    survivors = stop_leftovers(view, None, log)
    if survivors:
        raise SrtError(
            f"leftovers of the previous run in {job.path} could not be stopped: {', '.join(survivors)}"
        )
    group = JobCgroup.existing(view.state.cgroup, view.state.cookie)
    if group is not None:
        group.remove(wait=0.5)
    left = netns.remove(view.plan.local_network if view.plan is not None else None)
    if left:
        raise SrtError(
            f"the previous run's network in {job.path} could not be removed: {'; '.join(left)}"
        )
    for name in (STATE, RESULT):
        if os.path.exists(job.file(name)):
            os.replace(job.file(name), job.file(name + ".previous"))


def survive_hangups() -> None:
    """A hung-up terminal must not end ``srt run`` (the job goes on, see the orchestrator's
    SIGHUP handler), before the job starts or after it ended either. A handler, not
    ``SIG_IGN``: an ignored signal would stay ignored in every service srt starts."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
        signal.signal(signal.SIGHUP, _hung_up)


def _hung_up(signum: int, frame: Any) -> None:
    """Nothing to do: output to the gone terminal is dropped where it is written."""
