"""Teardown of a job whose service left 20 escaped helpers that ignore SIGTERM, against a
raw kill loop, in the same run.

Run from the repository root with the dev venv: ``.venv/bin/python bench/runtime_escapees.py``
(about 20 s). Prints numbers, asserts nothing, leaves nothing running.

The job: one service that starts 20 helpers, each double-forked into a session of its own
and ignoring SIGTERM, then stays up; ``stop_grace_seconds: 1``. srt gets SIGTERM once all
20 run. Teardown time = ``job_finished`` minus ``stop_requested`` (``mono``). Raw baseline:
the same 20 helpers started from here, SIGKILL to each of their process groups in a loop,
then waiting until all are gone. Target (issue 18): grace + 3x the raw loop. Run it with
``SRT_CGROUP=off`` to measure the fallback (no cgroup) path.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _jobs import Job, by_event, drop_scratch
from srt_services.launch import process
from srt_services.testing.survivors import survivors

GRACE = 1.0
HELPERS = 20
HELPER = r"""
import os, signal, sys, time
pids, count = sys.argv[1], int(sys.argv[2])
for _ in range(count):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            with open(pids, "a") as fh:
                fh.write(f"{os.getpid()}\n")
            while True:
                time.sleep(1)
        os._exit(0)
print("up", flush=True)
while True:
    time.sleep(1)
"""


def _pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def srt_round(root: Path, n: int) -> dict[str, Any]:
    pids = root / f"pids{n}"
    recipe = {
        "schema": 2,
        "observability": {"metrics": False},
        "name": f"escapees-{n}",
        "services": [
            {
                "name": "spawner",
                "command": [sys.executable, "-c", HELPER, str(pids), str(HELPERS)],
                "readiness": {"log": {"pattern": "up"}},
                "stop_grace_seconds": GRACE,
            }
        ],
    }
    job = Job(root, f"escapees-{n}", recipe)
    try:
        job.start()
        job.wait_for(lambda evs: bool(by_event(evs, "serving")))
        deadline = time.monotonic() + 10
        while len(_pids(pids)) < HELPERS and time.monotonic() < deadline:
            time.sleep(0.01)
        job.stop(timeout=60)
        left = [p for p in _pids(pids) if process.alive(p)] + survivors(str(job.dir))
        events = job.events()
    finally:
        job.report_problems(job.cleanup())
        for pid in _pids(pids):
            process.signal_pid(pid, signal.SIGKILL)
    stop = by_event(events, "stop_requested")
    end = by_event(events, "job_finished")
    took = end[0]["mono"] - stop[0]["mono"] if stop and end else float("nan")
    return {"took": took, "left": left, "code": job.code}


def raw_round(root: Path, n: int) -> float:
    """The same helpers started from here; SIGKILL to their groups in a loop, wait all."""
    import subprocess

    pids = root / f"raw{n}"
    spawner = subprocess.Popen(
        [sys.executable, "-c", HELPER, str(pids), str(HELPERS)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 10
        while len(_pids(pids)) < HELPERS and time.monotonic() < deadline:
            time.sleep(0.01)
        helpers = _pids(pids)
        t0 = time.perf_counter()
        for pid in helpers:
            process.signal_group(os.getpgid(pid), signal.SIGKILL)
        while any(process.alive(p) for p in helpers):
            time.sleep(0.001)
        return time.perf_counter() - t0
    finally:
        process.signal_group(spawner.pid, signal.SIGKILL)
        spawner.wait()
        for pid in _pids(pids):
            process.signal_pid(pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="Keep the job directories.")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="srt-bench-escapees-"))
    try:
        srt = [srt_round(root, n) for n in range(args.rounds)]
        raw = [raw_round(root, n) for n in range(args.rounds)]
    finally:
        drop_scratch(root, args.keep)
    took = statistics.median(r["took"] for r in srt)
    base = statistics.median(raw)
    path = "fallback (SRT_CGROUP=off)" if os.environ.get("SRT_CGROUP") == "off" else "default"
    print(
        f"teardown with {HELPERS} escaped helpers that ignore SIGTERM (grace {GRACE:g} s, {path})"
    )
    print(f"  {'srt, stop_requested -> job_finished':38} {took * 1000:8.1f} ms")
    print(f"  {f'raw SIGKILL to {HELPERS} groups + wait':38} {base * 1000:8.1f} ms")
    print(
        f"  srt - grace = {(took - GRACE) * 1000:.1f} ms = {(took - GRACE) / base:.1f}x the raw"
        f" loop (target: total <= {(GRACE + 3 * base) * 1000:.0f} ms, grace + 3x raw)"
    )
    each = {"srt": [round(r["took"] * 1000) for r in srt], "raw": [round(x * 1000, 1) for x in raw]}
    print(f"  (medians of {args.rounds} rounds, in ms: {each})")
    leaked = sum(len(r["left"]) for r in srt)
    print(f"  srt exit codes {sorted({r['code'] for r in srt}, key=str)}; processes left: {leaked}")


if __name__ == "__main__":
    main()
