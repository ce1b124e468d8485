"""``srt stop JOBDIR``: stop a job from another shell, or clean up after a dead one.

If the orchestrator lives, it is asked to stop (SIGTERM) and waited for; it alone knows
the tiers and graces, and the job ends recorded as stopped by the user. If it died, what
it left is stopped tier by tier from here (:mod:`srt_services.supervise.recovery`). A
Slurm job is cancelled through Slurm. "nothing of the job is running" is said only after a
last look found nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
from dataclasses import dataclass

from srt_services import procfs
from srt_services.errors import SrtError
from srt_services.jobdir.cause import StopKind
from srt_services.jobdir.result import JobResult
from srt_services.jobdir.state import write_state
from srt_services.jobdir.stop_request import StopRequest as PendingStop
from srt_services.jobdir.stop_request import write_stop_request
from srt_services.jobdir.view import JobView
from srt_services.launch.cgroup import JobCgroup
from srt_services.supervise.recovery import (
    DEFAULT_GRACE,
    ORCHESTRATOR_MARGIN,
    Log,
    grace_of,
    leftovers,
    stop_leftovers,
    wait_gone,
)


@dataclass(frozen=True, slots=True)
class StopRequest:
    job_dir: str
    #: skip the graces: SIGKILL at once
    now: bool = False
    #: the grace to give each tier (default: the plan's)
    timeout: float | None = None


#: Instance states only a running orchestrator can keep up.
LIVE_STATES = frozenset({"pending", "starting", "ready", "unhealthy", "backoff", "stopping"})


def mark_stopped(view: JobView, note: str) -> None:
    """Record in ``state.json`` that the job was stopped from outside (and by what).

    Its instances are stopped too: an instance the dead orchestrator last saw ``ready`` is
    not ready in a job that says ``stopped`` (``srt status`` would show both otherwise).
    """
    if view.state is None:
        return
    instances = {
        step: dataclasses.replace(inst, state="stopped") if inst.state in LIVE_STATES else inst
        for step, inst in view.state.instances.items()
    }
    stopped = dataclasses.replace(
        view.state, status="stopped", stopped_by=note, instances=instances
    )
    write_state(view.job, stopped)


def _stop_slurm_job(job_id: str, now: bool, timeout: float | None, log: Log) -> int:
    from srt_services.launch.slurm import control

    log(f"stopping Slurm job {job_id}")
    gone = control.stop(job_id, timeout if timeout is not None else 60.0, now=now, log=log)
    if not gone:
        log(f"Slurm job {job_id} is still listed after scancel")
        return 1
    log("nothing of the job is running")
    return 0


def _ask_orchestrator(view: JobView, now: bool, timeout: float | None, log: Log) -> bool:
    """SIGTERM the live orchestrator (twice with ``now``) and wait; True once it is gone."""
    assert view.state is not None
    orch = view.state.orchestrator
    log(f"asking the orchestrator (pid {orch.pid}) to stop the job")
    procfs.signal_same(orch.pid, orch.start_ticks, signal.SIGTERM)
    if now:
        time.sleep(0.05)
        procfs.signal_same(orch.pid, orch.start_ticks, signal.SIGTERM)
    grace = max((grace_of(g) for g in view.grace().values()), default=DEFAULT_GRACE)
    limit = timeout if timeout is not None else grace + ORCHESTRATOR_MARGIN
    if wait_gone([orch.pid], limit):
        log(f"the orchestrator did not finish within {limit:g}s; stopping its processes directly")
        return False
    return True


def _remove_cgroup(view: JobView) -> None:
    """Once nothing of the job runs: its cgroup, and its network namespaces and bridge
    (a killed orchestrator leaves both; the plan names exactly what the job made)."""
    group = JobCgroup.existing(view.state.cgroup if view.state else None, view.cookie)
    if group is not None:
        group.remove(wait=0.5)
    from srt_services.launch import netns

    netns.remove(view.plan.local_network if view.plan is not None else None)


class NotYours(SrtError):
    """Another user's job: only its owner (or root) may stop it."""


def owner_uid(view: JobView) -> int | None:
    """Who runs the job: its live orchestrator's user, else the job directory's owner."""
    state = view.state
    if state is not None and view.orchestrator_alive() and state.orchestrator.elsewhere() is None:
        try:
            return os.stat(f"/proc/{state.orchestrator.pid}").st_uid
        except OSError:
            pass
    try:
        return os.stat(view.job.path).st_uid
    except OSError:
        return None


def check_may_act(view: JobView, what: str) -> None:
    """:class:`NotYours` unless this user may ``what`` (``stop this job``): its owner and
    root may; anyone else is refused before anything is written or signalled."""
    me = os.geteuid()
    owner = owner_uid(view)
    if me == 0 or owner is None or owner == me:
        return
    raise NotYours(
        f"refused: {view.job.path} belongs to uid {owner}, and you are uid {me}: only its"
        f" owner (or root) may {what}"
    )


def stop_job(request: StopRequest, log: Log = print) -> int:
    """``srt stop``: returns 0 when nothing of the job is left running. Another user's job
    is refused (:class:`NotYours`); so is anything the system does not let this user do."""
    view = JobView.read(request.job_dir)
    check_may_act(view, "stop it")
    try:
        return _stop_job(view, request, log)
    except PermissionError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise NotYours(f"refused: permission denied{where}: {exc.strerror}") from None


def _stop_job(view: JobView, request: StopRequest, log: Log) -> int:
    path, now, timeout = request.job_dir, request.now, request.timeout
    if view.slurm_job_id is not None:
        if view.result is None:
            write_stop_request(view.job, view.cookie, now)
        return _stop_slurm_job(view.slurm_job_id, now, timeout, log)
    elsewhere = view.state.orchestrator.elsewhere() if view.state is not None else None
    if elsewhere is not None:
        return _orchestrator_elsewhere(view, elsewhere, log)
    alive = view.orchestrator_alive()
    if not alive and view.result is not None:
        log(f"the job has already ended ({_ended(view.result)})")
        return _stop_directly(view, now, timeout, log)
    sent = None
    if alive:
        # read by the orchestrator when the signal arrives: the job ends as stopped by us
        sent = write_stop_request(view.job, view.cookie, now)
    if sent is not None and _ask_orchestrator(view, now, timeout, log):
        view = JobView.read(path)
        _drop_if_left(view, sent)
        if not leftovers(view):
            _remove_cgroup(view)
            log(_outcome(view, sent))
            return 0
    return _stop_directly(view, now, timeout, log)


def _ended(result: JobResult) -> str:
    why = f": {result.cause.message}" if result.cause is not None and result.cause.message else ""
    return f"{result.status}, exit code {result.exit_code}{why}"


def _outcome(view: JobView, sent: PendingStop) -> str:
    """What the orchestrator made of the stop: the job's record decides, so ``srt stop``
    never says "stopped" about a job that ended on its own while the stop was on its way."""
    result = view.result
    if result is None:
        return "stopped"
    cause = result.cause
    if cause is not None and cause.kind is StopKind.USER_STOP:
        return "stopped" if cause.by in (None, sent.who) else f"stopped (by {cause.by})"
    return (
        f"the job had already ended on its own when the stop arrived ({_ended(result)});"
        " the stop changed nothing"
    )


def _drop_if_left(view: JobView, sent: PendingStop) -> None:
    """Our stop request, if the orchestrator ended before it took it (it takes it when the
    signal arrives, and at its end): never left behind for a later run to find."""
    from srt_services.jobdir.reading import JobFileError, read
    from srt_services.jobdir.stop_request import StopRequest as Written

    try:
        there = read(Written, view.job.stop_request_file, "a stop request", 64 * 1024)
    except JobFileError:
        return
    if there is not None and there.pid == sent.pid and there.t == sent.t:
        with contextlib.suppress(OSError):
            os.unlink(view.job.stop_request_file)


def _orchestrator_elsewhere(view: JobView, elsewhere: str, log: Log) -> int:
    """The job's orchestrator is out of this process's sight (``elsewhere`` says why): after
    a reboot nothing of the job can run, so it is only marked stopped; on another host or
    in another PID namespace only an ``srt stop`` run there can reach it."""
    assert view.state is not None
    orch = view.state.orchestrator
    if "rebooted" in elsewhere:
        log(f"the job's orchestrator (pid {orch.pid}) cannot be running: {elsewhere}")
        if not view.state.finished:
            mark_stopped(view, "srt stop (after a reboot)")
        return 0
    log(
        f"cannot stop this job from here: its orchestrator (pid {orch.pid}) {elsewhere};"
        " run `srt stop` there"
    )
    return 1


def stop_lost_job(view: JobView, log: Log, by: str) -> list[str]:
    """Stop what a dead orchestrator left, tier by tier with the plan's graces, and record
    the job stopped ``by``; returns what could not be stopped (the watchdog of ``srt run -d``)."""
    survivors = stop_leftovers(view, None, log)
    mark_stopped(view, by)
    left = survivors or [f"pid {f.pid} ({f.step or '?'})" for f in leftovers(view)]
    if left:
        log("could not stop: " + ", ".join(left))
    else:
        _remove_cgroup(view)
        log("nothing of the job is running")
    return left


def _stop_directly(view: JobView, now: bool, timeout: float | None, log: Log) -> int:
    """Stop what is left of the job without its orchestrator (gone, or too slow); 0 when
    nothing of the job is left running."""
    survivors = stop_leftovers(view, 0.0 if now else timeout, log)
    if view.state is not None and not view.state.finished and not view.orchestrator_alive():
        # a lost job: its record says who ended it (one that ended keeps how it did)
        mark_stopped(view, "srt stop")
    left = leftovers(view)
    if survivors or left:
        shown = survivors or [f"pid {f.pid} ({f.step or '?'})" for f in left]
        log("could not stop: " + ", ".join(shown))
        return 1
    _remove_cgroup(view)
    log("nothing of the job is running")
    return 0
