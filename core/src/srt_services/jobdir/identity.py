"""How a process is known to belong to a job: the cookie in its environment.

Every process srt starts carries ``SRT_JOB_COOKIE`` (a random token per job) and
``SRT_INSTANCE`` (its step). Whatever a service does afterwards (double fork, ``setsid``,
``nohup … &``), its descendants keep that environment, so the job's processes can be found
by cookie, and confirmed by start time, even after the orchestrator itself died.

Kept free of heavy imports: a port check runs it on every node through ``srun``.
"""

from __future__ import annotations

import secrets

COOKIE_VAR = "SRT_JOB_COOKIE"
INSTANCE_VAR = "SRT_INSTANCE"


def new_cookie() -> str:
    return secrets.token_hex(16)
