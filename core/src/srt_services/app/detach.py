"""``srt run -d``: the job started in the background, its orchestrator watched.

The shell's ``srt`` loads the recipe (a bad one is refused here, at its line, before
anything starts), then starts a watchdog in a session of its own (no terminal: the job
survives the shell and its hang-up) and returns once the orchestrator has written the
job's state (then ``detached.json`` names the watchdog and the orchestrator). The watchdog
starts the orchestrator (an ordinary ``srt run --plain``, its output in
``logs/orchestrator.out``) as its child and waits for it.

Why a parent and not a poll: the watchdog learns of the orchestrator's death the moment it
happens (``waitpid``). An orchestrator that ends the job writes ``result.json`` first; one
that died without (``kill -9``, the OOM killer, a crash) left services running with nobody
to restart or stop them, so the watchdog stops them as ``srt stop`` stops a lost job: tier
by tier, each with its stop signal and the plan's grace, then SIGKILL. What runs on after
the orchestrator's death is therefore bounded by the sum of the tiers' graces (plus a second
of margin each); ``docs/user-guide.md`` says so. A watchdog killed itself takes nothing
down (the orchestrator goes on, unwatched), and both killed at once is ``srt stop``'s case.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from srt_services import procfs
from srt_services.jobdir.layout import JobDir, atomic_write, default_job_dir

if TYPE_CHECKING:
    from srt_services.app.compose import Setup
    from srt_services.app.run import RunRequest

#: In the job directory: who watches whom (the watchdog's and the orchestrator's PIDs).
DETACHED = "detached.json"
#: In ``logs/``: what the orchestrator prints (``srt run --plain``), read by ``srt logs``.
ORCHESTRATOR_LOG = "orchestrator.out"
#: How long ``srt run -d`` waits for the orchestrator to write the job's state.
START_WAIT = 120.0


@dataclass(frozen=True, slots=True)
class Detached:
    job_dir: str
    watchdog_pid: int
    orchestrator_pid: int | None
    #: the exit status when the run ended before it was up (else ``None``)
    code: int | None = None
    #: the end of the orchestrator's output, when it ended before it was up
    output: list[str] = field(default_factory=list)


def run_argv(request: RunRequest, job_dir: str) -> list[str]:
    """The ``srt run`` the watchdog starts: the same request, in the chosen directory."""
    argv = [sys.executable, "-m", "srt_services", "run", os.path.abspath(request.recipe)]
    argv += ["--job-dir", job_dir, "--plain", "--launcher", request.launcher]
    if request.nodes is not None:
        argv += ["--nodes", str(request.nodes)]
    if request.grace is not None:
        argv += ["--grace", repr(request.grace)]
    if request.variant is not None:
        argv += ["--variant", request.variant]
    if request.local_network is not None:
        argv += ["--local-network", request.local_network]
    return argv


def start(where: Setup, request: RunRequest, wait: float = START_WAIT) -> Detached:
    """Start the job in the background; return once its orchestrator is up (or ended)."""
    from srt_services.app import compose
    from srt_services.launch.process import tail

    # refused here, not in a log file
    loaded = compose.load(where, request.recipe, variant=request.variant)
    job_dir = os.path.abspath(request.job_dir or default_job_dir(loaded.recipe.name))
    job = JobDir(job_dir)
    os.makedirs(job.logs, exist_ok=True)
    log_path = os.path.join(job.logs, ORCHESTRATOR_LOG)
    with open(log_path, "ab") as out, open(os.devnull, "rb") as null:
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "srt_services.app.detach", job_dir, *run_argv(request, job_dir)],
            stdin=null,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        code = watchdog.poll()
        if code is not None:
            return Detached(job_dir, watchdog.pid, None, code, tail(log_path, 20))
        orch = _up(job, watchdog.pid)
        if orch is not None:
            # written once this run holds the directory: a run refused there (another job
            # holds it) must not overwrite the record of the one that runs
            atomic_write(
                job.file(DETACHED),
                json.dumps({"watchdog": watchdog.pid, "orchestrator": orch}).encode(),
            )
            return Detached(job_dir, watchdog.pid, orch)
        time.sleep(0.05)
    return Detached(job_dir, watchdog.pid, None)


def _up(job: JobDir, watchdog: int) -> int | None:
    """The orchestrator's PID once it has written the job's state: the state's
    orchestrator is the watchdog's child (not an older run's, nor another's)."""
    from srt_services.jobdir.state import read_state

    try:
        state = read_state(job)
    except Exception:
        return None  # being written, or an older run's unreadable one
    if state is None:
        return None
    ids = procfs.stat_ids(state.orchestrator.pid)
    return state.orchestrator.pid if ids is not None and ids[0] == watchdog else None


def exit_words(code: int) -> str:
    return f"signal {-code}" if code < 0 else f"exit {code}"


def watch(job_dir: str, argv: Sequence[str]) -> int:
    """The watchdog: run the orchestrator, and stop what it left if it died without ending
    the job. Returns the orchestrator's exit status (128+N after signal N)."""
    job = JobDir(job_dir)
    # no terminal in this session: nothing sends SIGINT or SIGHUP to either
    orch = subprocess.Popen(list(argv), close_fds=True)
    code = orch.wait()
    status = 128 - code if code < 0 else code
    if code < 0 or not os.path.exists(job.file("result.json")):
        stop_lost(job, orch.pid, code)
    return status


def stop_lost(job: JobDir, pid: int, code: int) -> None:
    """The orchestrator ``pid`` ended (``code``) without ending its job: stop what it left,
    and record why (in ``events.jsonl`` and the state)."""
    from srt_services.app.stop import stop_lost_job
    from srt_services.jobdir.events import EventLog
    from srt_services.jobdir.layout import JobDirError
    from srt_services.jobdir.view import JobView

    try:
        view = JobView.read(job.path)
    except JobDirError:
        return  # it never got as far as a state: nothing was started
    if view.state is None or view.state.orchestrator.pid != pid or view.state.finished:
        return  # another run's state (this one was refused before it began), or ended

    def log(message: str) -> None:
        sys.stdout.write(f"srt watchdog: {message}\n")
        sys.stdout.flush()

    why = f"orchestrator (pid {pid}) died ({exit_words(code)}) without ending the job"
    log(f"the {why}: stopping what it started")
    events = EventLog(job.events_file)
    try:
        events.emit("orchestrator_lost", pid=pid, code=code if code >= 0 else None,
                    signal=-code if code < 0 else None)  # fmt: skip
        left = stop_lost_job(view, log, by=f"srt run -d watchdog: the {why}")
        events.emit("watchdog_stopped", pid=pid, left=left or None)
    finally:
        events.close()


def main(args: Sequence[str]) -> int:
    if len(args) < 2:
        sys.stderr.write("usage: python -m srt_services.app.detach JOBDIR ARGV...\n")
        return 2
    return watch(args[0], args[1:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
