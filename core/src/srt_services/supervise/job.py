"""``srt run`` from recipe to exit code: load, plan, prepare the job directory, supervise."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from srt_services.errors import SrtError
from srt_services.jobdir.cause import StopKind
from srt_services.jobdir.identity import new_cookie
from srt_services.jobdir.layout import RESULT, STATE, JobDir, atomic_write, default_job_dir
from srt_services.jobdir.lock import JobLock
from srt_services.jobdir.view import JobView
from srt_services.launch import process
from srt_services.launch.cgroup import JobCgroup
from srt_services.plan.allocation import AllocationRequest
from srt_services.supervise.recovery import Log, stop_leftovers

if TYPE_CHECKING:
    from srt_services.supervise.orchestrator import Orchestrator

SUMMARY_TAIL = 8


@dataclass(slots=True)
class RunRequest:
    recipe: str
    job_dir: str | None = None
    nodes: int | None = None
    launcher: str = "local"
    quiet: bool = False
    plain: bool | None = None
    grace: float | None = None


#: Space set aside in the job directory when the job starts, given back to write the
#: final state and result.json if the disk fills up meanwhile.
RESERVE = ".srt-reserve"
RESERVE_BYTES = 256 * 1024


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
    for name in (STATE, RESULT):
        if os.path.exists(job.file(name)):
            os.replace(job.file(name), job.file(name + ".previous"))


def _survive_hangups() -> None:
    """A hung-up terminal must not end ``srt run`` (the job goes on, see the orchestrator's
    SIGHUP handler), before the job starts or after it ended either. A handler, not
    ``SIG_IGN``: an ignored signal would stay ignored in every service srt starts."""
    if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
        signal.signal(signal.SIGHUP, _hung_up)


def _hung_up(signum: int, frame: Any) -> None:
    """Nothing to do: output to the gone terminal is dropped where it is written."""


def run_job(req: RunRequest) -> int:
    from srt_services import app
    from srt_services.supervise.progress import make_progress

    _survive_hangups()

    plugins = app.plugin_set()
    loaded = app.load(req.recipe, plugins)
    launcher_cls = plugins.launcher_class(req.launcher)
    path = req.job_dir or default_job_dir(loaded.recipe.name)
    progress = make_progress(req.quiet, req.plain)

    def note(message: str) -> None:
        progress({"event": "note", "detail": message})

    job, lock = prepare_job_dir(path, note)
    try:
        return _run_locked(req, job, loaded, plugins, launcher_cls, progress, note)
    finally:
        lock.release()


def _run_locked(
    req: RunRequest,
    job: JobDir,
    loaded: Any,
    plugins: Any,
    launcher_cls: Any,
    progress: Any,
    note: Callable[[str], None],
) -> int:
    from srt_services import app
    from srt_services.supervise.orchestrator import Orchestrator, RunOptions

    request = AllocationRequest(
        kind="local", count=req.nodes, job_id=os.path.basename(job.path), job_dir=job.path
    )
    planned = app.plan(
        loaded,
        lambda needed: launcher_cls.allocation(request, needed),
        job_dir=job.path,
        recipe_dir=os.environ.get("SRT_RECIPE_DIR") or os.path.dirname(os.path.abspath(req.recipe)),
        plugins=plugins,
    )
    plan = planned.plan
    for message in app.for_launcher(planned, launcher_cls):
        note(message)
    try:
        atomic_write(job.plan_file, plan.to_json(indent=True))
        copy = job.file("recipe" + (os.path.splitext(req.recipe)[1] or ".yaml"))
        if not os.path.exists(copy) or not os.path.samefile(req.recipe, copy):
            shutil.copyfile(req.recipe, copy)
    except OSError as exc:
        raise SrtError(f"cannot write in the job directory {job.path}: {exc.strerror}") from None
    for w in loaded.warnings:
        note("warning: " + w.render(req.recipe))
    orch = Orchestrator(
        plan,
        job,
        launcher_cls,
        plugins,
        RunOptions(
            cookie=new_cookie(),
            site_passthrough=planned.site.env_passthrough,
            grace_override=req.grace,
            on_event=progress,
            reserve=job.file(RESERVE),
        ),
    )
    try:
        code = orch.run()
    finally:
        progress.close()
    summary(orch, job, code)
    return code


def summary(orch: Orchestrator, job: JobDir, code: int) -> None:
    """Print how the job ended; a closed terminal must not change the exit status."""
    try:
        _summary(orch, job, code)
    except OSError:
        pass


def _summary(orch: Orchestrator, job: JobDir, code: int) -> None:
    import sys

    message = orch.stop_cause.message if orch.stop_cause is not None else ""
    out = sys.stderr if code else sys.stdout
    cause = orch.stop_cause
    if cause is not None and cause.kind is StopKind.USER_STOP:
        out.write(f"srt: job {orch.plan.job_name} {message} (exit {code})\n")
    elif code:
        out.write(f"srt: job {orch.plan.job_name} failed (exit {code}): {message}\n")
    else:
        out.write(f"srt: job {orch.plan.job_name} finished: {message or 'ok'}\n")
    for entry in orch.unkillable:
        out.write(f"srt: {entry}\n")
    # what the job's own run said last: the benchmark, or the terminal services
    ends = [u for u in orch.plan.units if u.category == "benchmark" or u.terminal]
    for unit in ends[:3]:
        for inst in unit.instances[:2]:
            lines = process.tail(os.path.join(job.path, inst.log), SUMMARY_TAIL)
            if lines:
                out.write(f"srt: last lines of {inst.log}:\n")
                out.write("".join(f"    {line}\n" for line in lines))
    out.write(f"srt: job directory {job.path}\n")
