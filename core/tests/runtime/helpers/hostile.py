"""Hostile services for the teardown tests: ``python hostile.py MODE PIDFILE``.

Every process that should not survive the job appends its PID to PIDFILE, so the test can
check them whatever they did to their environment.

``double-fork-deaf``: daemonizes a helper (double fork + setsid) that ignores SIGTERM by
forking another escapee (new session) on each one, and forked one already at start.
``scrubbed``: leaves processes without the job's cookie: one in its own session that
exec'd ``env -i``, one in the service's session with an empty environment, and one with a
made-up ``SRT_JOB_COOKIE``.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def record(path: str, label: str = "escapee") -> None:
    with open(path, "a", encoding="ascii") as fh:
        fh.write(f"{label} {os.getpid()}\n")


def linger(path: str) -> None:
    record(path)
    while True:
        time.sleep(1)


def escapee(path: str) -> None:
    """A fresh process in a session of its own (what a helper forks on SIGTERM)."""
    if os.fork() == 0:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        linger(path)


def double_fork_deaf(path: str) -> None:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, lambda *_: escapee(path))
            escapee(path)
            linger(path)
        os._exit(0)


def scrubbed(path: str) -> None:
    me = sys.executable

    def run(label: str, env: dict[str, str]) -> None:
        code = f"import os,time\nopen({path!r},'a').write('{label} '+str(os.getpid())+'\\n')\n"
        os.execve(me, [me, "-c", code + "time.sleep(1000)"], env)

    if os.fork() == 0:  # own session, empty environment, orphaned at once
        os.setsid()
        if os.fork() == 0:
            run("setsid-env-i", {})
        os._exit(0)
    if os.fork() == 0:  # the service's session, empty environment
        run("env-i", {})
    if os.fork() == 0:  # another job's cookie, made up
        os.setsid()
        run("foreign-cookie", {"SRT_JOB_COOKIE": "0" * 32, "SRT_JOB_DIR": "/nowhere"})


def main() -> None:
    mode, path = sys.argv[1], sys.argv[2]
    {"double-fork-deaf": double_fork_deaf, "scrubbed": scrubbed}[mode](path)
    print("up", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
