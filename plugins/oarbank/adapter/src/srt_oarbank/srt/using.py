"""Run a command inside an admission: admit, run, release, whatever way it ends.

This is how a unit of an srt job *uses* what a node agent's modules provide: its command
is wrapped (``srt oarbank run --socket S --need colima/vm --pool colima/containers=2 --
CMD``), so the admission comes before the command starts (an ``on_demand`` service is
started by the first one and waited for), the release comes when it ends (the service
stops after its ``idle_timeout_s`` with no users), and a refusal fails the unit with the
protocol's reason (pool exhausted, unavailable capability, memory) before anything of it
ran. The attempt id defaults to the instance's (``srt.<job id>.<step>``), the same one
reaping goes by, and reaches the command as ``OARBANK_ATTEMPT_ID`` for the labels of what
it has modules create.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from oarbank_protocol.agent.control import request

from srt_oarbank.srt.live_attempts import JOB_ID_VAR, attempt_id

#: Exit status of a refusal that may succeed later (tokens, memory), as ``srt oarbank admit``.
EXIT_RETRYABLE = 75
EXIT_REFUSED = 1
ATTEMPT_VAR = "OARBANK_ATTEMPT_ID"


def default_attempt(environ: Mapping[str, str], instance_var: str) -> str | None:
    job, step = environ.get(JOB_ID_VAR), environ.get(instance_var)
    return attempt_id(job, step) if job and step else None


def run_admitted(
    socket: Path,
    admission: dict[str, Any],
    argv: Sequence[str],
    *,
    timeout_s: float | None = None,
    reason_file: Path | None = None,
    release_stale: bool = False,
) -> int:
    """Admit, run ``argv`` to its end, release; the command's exit status (128+N for a
    signal), or the refusal's. Signals meant for the unit go to the command. A refusal (or
    an agent that does not answer) is also written to ``reason_file``: srt shows that line
    as the unit's reason (``srt status``, the ``exited`` event, the job's cause).

    ``release_stale``: the attempt id is an srt instance's, of which only one process runs
    at a time, so an admission already held under it is an earlier launch's that was killed
    before it could release (SIGKILL after the stop grace): released first, or this launch
    would be refused as "already admitted" and its tokens held until the job's end."""
    attempt = admission["attempt_id"]
    if release_stale:
        with contextlib.suppress(OSError, ValueError):
            request(socket, {"op": "release", "attempt_id": attempt}, 30)
    try:
        answer = request(socket, {"op": "admit", **admission}, timeout_s)
    except (OSError, ValueError) as exc:
        _refused(f"cannot reach the oarbank agent at {socket}: {exc}", reason_file)
        return EXIT_REFUSED
    if not answer.get("ok"):
        _refused(
            f"admission of {attempt} refused ({answer.get('kind', 'error')}): "
            f"{answer.get('error', answer)}",
            reason_file,
        )
        return EXIT_RETRYABLE if answer.get("retryable") else EXIT_REFUSED
    try:
        child = subprocess.Popen(list(argv), env={**os.environ, ATTEMPT_VAR: attempt})
    except OSError as exc:
        _release(socket, attempt)
        print(f"oarbank: cannot run {argv[0]!r}: {exc}", file=sys.stderr)
        return 127

    def forward(signum: int, _frame: FrameType | None) -> None:
        child.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        code = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if child.poll() is None:  # only when this process is being torn down itself
            child.kill()
            child.wait()
        _release(socket, attempt)
    return 128 - code if code < 0 else code


def _refused(reason: str, reason_file: Path | None) -> None:
    print(f"oarbank: {reason}", file=sys.stderr)
    if reason_file is not None:
        try:
            reason_file.write_text(f"oarbank: {reason}\n", encoding="utf-8")
        except OSError as exc:
            print(f"oarbank: cannot write {reason_file}: {exc}", file=sys.stderr)


def _release(socket: Path, attempt: str) -> None:
    try:
        request(socket, {"op": "release", "attempt_id": attempt}, 30)
    except (OSError, ValueError) as exc:
        print(f"oarbank: cannot release {attempt}: {exc}", file=sys.stderr)
