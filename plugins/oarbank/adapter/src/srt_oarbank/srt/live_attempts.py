"""The live attempts of an srt job, written where the oarbank agent reads them for reaping.

Inside an srt job an *attempt* is one instance of a unit (a role's worker, the benchmark,
a service): ``srt.<job id>.<step>``, which the unit can build from its own environment
(``SRT_JOB_ID``, ``SRT_INSTANCE``) to label what it has a module create. An instance is
live while a process carrying the job's cookie says it is that instance: srt puts both
variables into every process it launches, and a crashed or finished instance leaves none.

The file says ``{"scope": "srt.<job id>.", "live": [...], "dead": [...]}``: it speaks for
this job's attempts only, so objects of other jobs (or made by hand) are never reaped on
its word, and it calls dead only an instance it saw alive and then saw gone. An instance
launched since the last scan is in neither list (unknown: not reaped), never "dead", so a
file a moment old cannot get a new instance's objects destroyed. It is rewritten
atomically by a thread of the agent's process, several times per reaping period.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
from pathlib import Path

import psutil

log = logging.getLogger("srt_oarbank.live_attempts")

JOB_ID_VAR = "SRT_JOB_ID"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def safe(token: str) -> str:
    """``token`` in the characters an attempt id may hold (the protocol's names)."""
    return _UNSAFE.sub("-", token) or "-"


def attempt_scope(job_id: str) -> str:
    return f"srt.{safe(job_id)}."


def attempt_id(job_id: str, step: str) -> str:
    """The attempt id of one instance of a job (what its objects' labels must say)."""
    return attempt_scope(job_id) + safe(step)


def _environ_values(pid: int, names: tuple[str, ...]) -> dict[str, str]:
    try:
        raw = b"\0" + Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for name in names:
        key = b"\0" + name.encode() + b"="
        at = raw.find(key)
        if at >= 0:
            end = raw.find(b"\0", at + len(key))
            out[name] = raw[at + len(key) : end if end >= 0 else None].decode(errors="replace")
    return out


def live_steps(cookie: str, cookie_var: str, instance_var: str) -> set[str]:
    """The steps with at least one process of this job (by its cookie) alive now."""
    steps: set[str] = set()
    for pid in psutil.pids():
        env = _environ_values(pid, (cookie_var, instance_var))
        if env.get(cookie_var) == cookie and env.get(instance_var):
            steps.add(env[instance_var])
    return steps


def write_live_attempts(path: Path, job_id: str, live: set[str], dead: set[str]) -> None:
    document = {
        "scope": attempt_scope(job_id),
        "live": sorted(attempt_id(job_id, s) for s in live),
        "dead": sorted(attempt_id(job_id, s) for s in dead - live),
    }
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document), encoding="utf-8")
    os.replace(tmp, path)


class LiveAttemptsWriter:
    """Rewrites the file every ``period_s`` until :meth:`stop` (a daemon thread)."""

    def __init__(
        self,
        path: Path,
        *,
        job_id: str,
        cookie: str,
        cookie_var: str,
        instance_var: str,
        period_s: float,
    ) -> None:
        self.path = path
        self.job_id = job_id
        self.cookie = cookie
        self.vars = (cookie_var, instance_var)
        self.period_s = period_s
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-attempts", daemon=True)

    def write_once(self) -> None:
        live = live_steps(self.cookie, *self.vars)
        self.seen |= live
        write_live_attempts(self.path, self.job_id, live, self.seen - live)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(RuntimeError):
            self._thread.join(timeout=5)

    def _run(self) -> None:
        # First at once (until then the file is missing: liveness unknown, nothing reaped),
        # in this thread so the agent's own start does not wait for a scan.
        while True:
            try:
                self.write_once()
            except Exception:  # the reaper treats a stale file as it is; try again
                log.exception("cannot write the live attempts to %s", self.path)
            if self._stop.wait(self.period_s):
                return
