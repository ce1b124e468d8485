"""Paths inside a job directory, and how its files are written.

Writes are atomic (temporary file + rename) so that ``srt status`` never reads half a file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass

from srt_services.errors import SrtError

PLAN = "plan.json"
STATE = "state.json"
RESULT = "result.json"
EVENTS = "events.jsonl"
#: The Slurm submission record that ``srt apply`` leaves (see :mod:`.result`).
SUBMISSION = "job.json"
SCRIPT = "sbatch.sh"
#: ``srt stop JOBDIR`` leaves it just before it signals the orchestrator (see :mod:`.stop_request`).
STOP_REQUEST = "stop-request.json"
#: The running orchestrator's AF_UNIX control socket (see :mod:`.control`).
CONTROL_SOCKET = "control.sock"
#: Files whose presence makes a directory a job directory (any one of them).
MARKERS = (STATE, PLAN, SUBMISSION)


class JobDirError(SrtError):
    """A job directory (or one of its files) cannot be used; the message says which."""


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a reader sees the old file or the new one.

    A plain rename over the old file, not a ``RENAME_EXCHANGE`` swap that would save ext4's
    0.2-0.7 ms flush of the new data: ``state.json`` and ``result.json`` are what ``srt stop``
    and ``srt status`` recover a job from, and after a crash of the machine they must hold
    the old content or the new one, never nothing.

    The temporary file is created exclusively (``O_EXCL``, which also never follows a
    link): a link planted at its name (root writing ``state.json`` into a user's job
    directory for ``srt stop``) is removed, not written through.
    """
    tmp = f"{path}.tmp.{os.getpid()}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, 0o644)
    except FileExistsError:  # left by a crash of a process with this PID, or planted
        os.unlink(tmp)
        fd = os.open(tmp, flags, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def job_root(root: str | None = None) -> str:
    """Where new job directories go and where every command looks for jobs: ``root``, else
    ``$SRT_JOB_ROOT``, else the user's own (:func:`user_job_root`), whatever the current
    directory (a job started in one directory is found from any other)."""
    return root or os.environ.get("SRT_JOB_ROOT") or user_job_root()


def user_job_root() -> str:
    """``$XDG_STATE_HOME/srt/jobs`` (``~/.local/state/srt/jobs``): per user, in the home
    directory, which a Slurm cluster shares with its nodes."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(state, "srt", "jobs")


def default_job_dir(name: str, root: str | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join(job_root(root), f"{name}-{stamp}-{secrets.token_hex(2)}")


def is_job_dir(path: str) -> bool:
    """Whether ``path`` holds a job (a state, a plan or a Slurm submission record)."""
    return any(os.path.isfile(os.path.join(path, name)) for name in MARKERS)


@dataclass(slots=True)
class JobDir:
    path: str

    @property
    def logs(self) -> str:
        return os.path.join(self.path, "logs")

    def file(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def plan_file(self) -> str:
        return self.file(PLAN)

    @property
    def state_file(self) -> str:
        return self.file(STATE)

    @property
    def result_file(self) -> str:
        return self.file(RESULT)

    @property
    def events_file(self) -> str:
        return self.file(EVENTS)

    @property
    def submission_file(self) -> str:
        return self.file(SUBMISSION)

    @property
    def stop_request_file(self) -> str:
        return self.file(STOP_REQUEST)

    @property
    def control_socket(self) -> str:
        return self.file(CONTROL_SOCKET)

    def inside(self, relative: str) -> str:
        """Absolute path of ``relative`` that is guaranteed to stay inside the job dir."""
        root = os.path.realpath(self.path)
        target = os.path.realpath(os.path.join(root, relative))
        if target != root and not target.startswith(root + os.sep):
            raise JobDirError(f"{relative!r} would be outside the job directory")
        return target

    def create(self) -> None:
        for sub in ("", "logs", "work", "src"):
            os.makedirs(os.path.join(self.path, sub), exist_ok=True)
