"""The "no survivors" oracle: nothing carrying a job's cookie may outlive the job.

Every process srt starts inherits ``SRT_JOB_COOKIE``; escaped daemons keep it. After a job
ended, scanning ``/proc`` for that cookie is a complete check that works whatever the
service did (double fork, ``setsid``, ``nohup``), and it never needs PIDs from the job.
Zombies are not survivors (they hold no resources and their parent reaps them).

The cookie alone misses a process that scrubbed its environment (``env -i``) or set
another job's cookie, so the scan also takes the job's cgroup, the sessions and process
groups srt recorded in ``state.json`` (processes no older than the job), and every
descendant of those (:mod:`srt_services.launch.jobprocs`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterable

from srt_services import procfs
from srt_services.contracts.plan import LocalNetwork, Plan
from srt_services.jobdir.layout import JobDir, JobDirError
from srt_services.jobdir.state import JobState, read_state
from srt_services.launch import jobprocs, netns, process
from srt_services.launch.cgroup import JobCgroup


def _state(job_dir: str) -> JobState | None:
    try:
        return read_state(JobDir(job_dir))
    except JobDirError:
        return None


def cookie_of_job(job_dir: str) -> str | None:
    state = _state(job_dir)
    return state.cookie if state is not None else None


def _orch_alive(state: JobState) -> bool:
    return procfs.same_process(state.orchestrator.pid, state.orchestrator.start_ticks)


def _kill_orchestrator(job_dir: str) -> None:
    state = _state(job_dir)
    if state is None:
        return
    orch = state.orchestrator
    if procfs.same_process(orch.pid, orch.start_ticks):
        process.signal_pid(orch.pid, signal.SIGKILL)


def _found(job_dir: str) -> dict[int, str | None]:
    """Every live process of the job: by cookie, in its cgroup, in the sessions it created,
    and their descendants (the orchestrator itself excluded)."""
    state = _state(job_dir)
    if state is None or not state.cookie:
        return {}
    group = JobCgroup.existing(state.cgroup, state.cookie)
    known = group.members() if group is not None else {}
    sessions: dict[int, str | None] = {s.sid: s.step for s in state.sessions}
    for step, inst in [*state.instances.items(), *state.builds.items()]:
        if inst.pgid is not None:
            sessions.setdefault(inst.pgid, step)
    found = jobprocs.find(
        state.cookie,
        sessions=sessions,
        not_before=state.orchestrator.start_ticks,
        known=known,
    )
    orch = state.orchestrator
    if procfs.same_process(orch.pid, orch.start_ticks):
        found.pop(orch.pid, None)
    return found


def survivors(job_dir: str, also: Iterable[int] = ()) -> list[str]:
    """What is left of the job (``also``: PIDs a test recorded, e.g. of processes that
    scrubbed their environment)."""
    found = _found(job_dir)
    for pid in also:
        if procfs.alive(pid):
            found.setdefault(pid, None)
    out = []
    for pid, step in sorted(found.items()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        out.append(f"pid {pid} ({step}): {cmd}")
    return out


def assert_no_survivors(job_dir: str, wait: float = 2.0, also: Iterable[int] = ()) -> None:
    """Fail (after killing them, so one bad test does not poison the next) if any survive."""
    also = list(also)
    deadline = time.monotonic() + wait
    left = survivors(job_dir, also)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = survivors(job_dir, also)
    if left:
        _kill_orchestrator(job_dir)  # first, or it restarts what we kill
        for pid in [*_found(job_dir), *also]:
            process.signal_pid(pid, signal.SIGKILL)
        raise AssertionError("processes of the job survived it:\n  " + "\n  ".join(left))
    state = _state(job_dir)
    group = JobCgroup.existing(
        state.cgroup if state is not None else None, state.cookie if state is not None else None
    )
    if group is not None and not (state is not None and not state.finished and _orch_alive(state)):
        group.remove(wait=0.5)  # left by a job that ended with a survivor, now gone
    if state is None or not _orch_alive(state):
        assert_network_gone(job_dir)


def network_of(job_dir: str) -> LocalNetwork | None:
    """The job's network record from its ``plan.json`` (``None``: none, or no plan)."""
    try:
        with open(JobDir(job_dir).plan_file, "rb") as fh:
            return Plan.from_json(fh.read()).local_network
    except (OSError, ValueError):
        return None


def assert_network_gone(job_dir: str) -> None:
    """Fail (after removing them) if the namespaces, veths or bridge of a namespaced job
    outlived it: like a process, a network object the job made must not survive it."""
    net = network_of(job_dir)
    left = netns.leftovers(net)
    if left:
        netns.remove(net)
        raise AssertionError("network objects of the job survived it: " + ", ".join(left))
