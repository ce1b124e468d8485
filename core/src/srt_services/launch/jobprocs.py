"""Finding every process of a job, with or without its cookie.

The cookie in the environment (:mod:`srt_services.jobdir.identity`) finds most of them,
but a process can drop it (``env -i``, a protocol that passes no environment) or carry
another one. So a job's processes are whatever any of these says is the job's:

* the job's cgroup (:mod:`srt_services.launch.cgroup`), where there is one: the kernel's
  bookkeeping, which nothing short of root can leave;
* the sessions and process groups srt created (every launch starts a new session), for
  processes that started no earlier than the job;
* the descendants of everything above, and of the orchestrator's own children (as a child
  subreaper it inherits every orphan of the job);
* the cookie (needed after the orchestrator died: its orphans went to PID 1).

While the orchestrator lives and is the job's child subreaper, every process of the job
descends from it (an orphan re-parents to the nearest living subreaper ancestor), so
:func:`below` walks that tree through ``/proc/<pid>/task/*/children``: O(job), not
O(machine). :func:`find` reads every process of the machine; it is the last word (a
process outside the tree that carries the cookie, one the walk missed while a parent
exited mid-read) and the only way in once the orchestrator is gone.

A process carrying *another* job's cookie is left alone only when that cookie belongs to
a live srt job of this machine (its job directory says so); otherwise the cookie is just
an environment variable a service set, and the process is this job's like any other.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from functools import lru_cache

from srt_services import procfs
from srt_services.jobdir.identity import COOKIE_VAR, INSTANCE_VAR

#: The variables :func:`job_environ` extracts, as they start an entry of ``environ``.
_WANTED = tuple(b"\0" + name.encode() + b"=" for name in (COOKIE_VAR, INSTANCE_VAR, "SRT_JOB_DIR"))


def job_environ(pid: int) -> dict[str, str]:
    """The srt variables of ``pid``'s environment (cookie, instance, job directory).

    Searched for, not parsed: the scans read this for every process of the job (or of the
    machine), and splitting a whole environment costs ten times the search."""
    try:
        fd = os.open(f"/proc/{pid}/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        raw = b"\0"
        while chunk := os.read(fd, 65536):
            raw += chunk
    except OSError:
        return {}
    finally:
        os.close(fd)
    out: dict[str, str] = {}
    for key in _WANTED:
        at = raw.find(key)
        if at >= 0:
            start = at + len(key)
            end = raw.find(b"\0", start)
            value = raw[start : end if end >= 0 else None]
            out[key[1:-1].decode()] = value.decode(errors="replace")
    return out


@lru_cache(maxsize=64)
def _live_job(job_dir: str, cookie: str) -> bool:
    from srt_services.jobdir.layout import JobDirError
    from srt_services.jobdir.view import JobView

    try:
        view = JobView.read(job_dir)
    except (JobDirError, OSError):
        return False
    return view.cookie == cookie and view.orchestrator_alive()


def foreign_live(env: Mapping[str, str], cookie: str) -> bool:
    """Whether ``env`` carries the cookie of another srt job that runs on this machine."""
    other = env.get(COOKIE_VAR)
    if not other or other == cookie:
        return False
    job_dir = env.get("SRT_JOB_DIR")
    if not job_dir:
        return False
    live = _live_job(job_dir, other)
    _live_job.cache_clear()  # a decision for this scan only: the other job may end
    return live


def find(
    cookie: str,
    *,
    sessions: Mapping[int, str | None] = {},
    roots: Iterable[int] = (),
    not_before: int | None = None,
    by_cookie: bool = True,
    known: Mapping[int, str | None] = {},
) -> dict[int, str | None]:
    """pid -> step (when known) of every live process of the job, in one pass over /proc.

    ``sessions`` maps a session or process-group id srt created to its step; ``roots``
    are processes whose descendants are the job's (the orchestrator's children);
    ``known`` is what the cgroup already says. ``not_before`` (clock ticks) excludes
    processes older than the job from the session and cookie matches, so a recycled id
    never drags in a stranger. ``by_cookie`` also reads every process's environment (the
    only way to find an orphan that left the job's sessions after the orchestrator died).
    """
    me = os.getpid()
    found, children = _scan(
        cookie, me, sessions=sessions, not_before=not_before, by_cookie=by_cookie, known=known
    )
    steps = _with_descendants(found, roots, children, known, me)
    out: dict[int, str | None] = {}
    for pid, step in steps.items():
        env = job_environ(pid)
        if foreign_live(env, cookie):
            continue
        if env.get(COOKIE_VAR) == cookie and env.get(INSTANCE_VAR):
            step = env[INSTANCE_VAR]  # its own instance beats the step it was found by
        out[pid] = step
    return out


def _children(pid: int) -> list[int]:
    """``pid``'s children, from every thread's ``children`` file (a child belongs to the
    thread that forked it)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            fd = os.open(f"/proc/{pid}/task/{tid}/children", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            data = b""
            while chunk := os.read(fd, 65536):
                data += chunk
        except OSError:
            continue
        finally:
            os.close(fd)
        out.extend(int(x) for x in data.split())
    return out


def below(
    root: int,
    cookie: str,
    *,
    sessions: Mapping[int, str | None] = {},
    skip: Collection[int] = (),
) -> dict[int, str | None]:
    """pid -> step (when known) of every live descendant of ``root`` (the orchestrator,
    when it is the job's subreaper), walking the process tree down from it.

    A process's step is its session's or process group's (``sessions``), else the one
    its own cookie names, else its parent's. A process in ``skip``, or whose process group
    is, is left out (an instance stopped through its group), its descendants are not.
    """
    out: dict[int, str | None] = {}
    todo: list[tuple[int, str | None]] = [(kid, None) for kid in _children(root)]
    seen = {root}
    while todo:
        pid, step = todo.pop()
        if pid in seen:  # a PID reused while the walk ran
            continue
        seen.add(pid)
        ids = procfs.stat_ids(pid)
        if ids is None:
            continue  # gone, or a zombie: it has no children left either
        _, pgid, sid, _ = ids
        step = sessions.get(sid) or sessions.get(pgid) or step
        if pid not in skip and pgid not in skip:
            env = job_environ(pid)
            if not foreign_live(env, cookie):
                if env.get(COOKIE_VAR) == cookie and env.get(INSTANCE_VAR):
                    step = env[INSTANCE_VAR]
                out[pid] = step
        todo.extend((kid, step) for kid in _children(pid))
    return out


def _scan(
    cookie: str,
    me: int,
    *,
    sessions: Mapping[int, str | None],
    not_before: int | None,
    by_cookie: bool,
    known: Mapping[int, str | None],
) -> tuple[dict[int, str | None], dict[int, list[int]]]:
    """One pass over /proc: the job's processes that ``known``, ``sessions`` or the cookie
    name (pid -> step), and every process's children (for :func:`_with_descendants`)."""
    children: dict[int, list[int]] = {}
    found: dict[int, str | None] = {}
    for pid in procfs.all_pids():
        if pid == me:
            continue
        ids = procfs.stat_ids(pid)
        if ids is None:
            continue
        ppid, pgid, sid, ticks = ids
        children.setdefault(ppid, []).append(pid)
        if pid in known:
            found[pid] = known[pid]
            continue
        young = not_before is None or ticks >= not_before
        if young and (sid in sessions or pgid in sessions):
            found[pid] = sessions.get(sid) or sessions.get(pgid)
        elif by_cookie and young:
            env = job_environ(pid)
            if env.get(COOKIE_VAR) == cookie:
                found[pid] = env.get(INSTANCE_VAR)
    return found, children


def _with_descendants(
    found: dict[int, str | None],
    roots: Iterable[int],
    children: Mapping[int, list[int]],
    known: Mapping[int, str | None],
    me: int,
) -> dict[int, str | None]:
    """``found`` plus the live ``roots`` and every descendant of either (never this
    process): a descendant takes its parent's step."""
    steps = dict(found)
    for pid in roots:
        if pid != me and pid not in steps and procfs.alive(pid):
            steps[pid] = known.get(pid)
    todo = list(steps)
    while todo:
        parent = todo.pop()
        for kid in children.get(parent, ()):
            if kid not in steps and kid != me:
                steps[kid] = steps.get(parent)
                todo.append(kid)
    return steps
