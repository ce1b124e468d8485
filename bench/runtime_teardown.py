"""Teardown of 200 services: from the stop request to the job's end, against a raw
kill-and-wait loop, with services that honour SIGTERM and with services that ignore it.

Run from the repository root with the dev venv: ``.venv/bin/python bench/runtime_teardown.py``
(about 30 s). Prints numbers, asserts nothing, leaves nothing running.

The job: 50 services of ``sleep 1000`` on a pool of 4 virtual nodes (200 instances), no
probe; once every instance runs, srt gets SIGTERM (a user's Ctrl-C). Teardown time = the
``mono`` of ``job_finished`` minus that of ``stop_requested``. Leaks: what
``srt_services.testing.survivors.survivors(job_dir)`` finds right after srt exits.
Raw baselines in the same run: 200 ``sleep 1000`` started from here in their own sessions,
then SIGTERM (or SIGKILL) to the 200 process groups in a loop and ``wait()`` for each.

With SIGTERM ignored, every service is ``sleep`` under ``trap '' TERM`` (a preamble: the
ignored signal survives ``exec``) and ``stop_grace_seconds: 1``: srt must wait the grace,
then SIGKILL.

Targets (issue 3): honouring SIGTERM <= 3x the raw kill-and-wait loop; SIGTERM ignored <=
grace + 3x the raw SIGKILL loop; zero leaked processes.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _jobs import Job, by_event, drop_scratch
from srt_services.launch import process
from srt_services.testing.survivors import survivors

# --------------------------------------------------------------------------- the job

GRACE = 1.0


def sleepers(name: str, services: int, nodes: int, ignore_term: bool) -> dict[str, Any]:
    """``services`` services of ``sleep 1000``, each with an instance on every pool node."""
    specs: list[dict[str, Any]] = []
    for i in range(services):
        spec: dict[str, Any] = {"name": f"s{i}", "command": ["sleep", "1000"]}
        if i == 0:
            spec["nodes"] = nodes
        else:
            spec["placement"] = {"pool": "s0"}
        if ignore_term:
            spec["preamble"] = "trap '' TERM"
            spec["stop_grace_seconds"] = GRACE
        else:
            spec["stop_grace_seconds"] = 30
        specs.append(spec)
    return {"schema": 2, "name": name, "observability": {"metrics": False}, "services": specs}


def ignores_term(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("SigIgn:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


def srt_round(root: Path, name: str, services: int, nodes: int, ignore: bool) -> dict[str, Any]:
    job = Job(root, name, sleepers(name, services, nodes, ignore))
    try:
        job.start()
        events = job.wait_for(lambda evs: bool(by_event(evs, "serving")))
        pids = [e["pid"] for e in by_event(events, "launched")]
        if ignore:
            time.sleep(0.2)  # let bash exec sleep (with SIGTERM ignored)
        ignoring = sum(ignores_term(pid) for pid in pids)
        job.stop(timeout=60)
        left = survivors(str(job.dir))
        events = job.events()
    finally:
        job.report_problems(job.cleanup())
    stop = by_event(events, "stop_requested")
    end = by_event(events, "job_finished")
    took = end[0]["mono"] - stop[0]["mono"] if stop and end else float("nan")
    return {
        "took": took,
        "launched": len(pids),
        "ignoring": ignoring,
        "escalated": len(by_event(events, "escalated")),
        "left": left,
        "code": job.code,
    }


def raw_round(count: int, sig: int) -> float:
    """Seconds to signal ``count`` process groups in a loop and wait for all of them."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen(["sleep", "1000"], start_new_session=True))
        time.sleep(0.2)
        t0 = time.perf_counter()
        for p in procs:
            process.signal_group(p.pid, sig)
        for p in procs:
            p.wait(30)
        return time.perf_counter() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                process.signal_group(p.pid, signal.SIGKILL)
                p.wait()


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=50, help="Services (x nodes instances).")
    parser.add_argument("--nodes", type=int, default=4, help="Virtual nodes of the pool.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="Keep the job directories.")
    args = parser.parse_args()
    count = args.services * args.nodes
    root = Path(tempfile.mkdtemp(prefix="srt-bench-teardown-"))
    try:
        for ignore in (False, True):
            srt: list[dict[str, Any]] = []
            raw: list[float] = []
            for n in range(args.rounds):
                name = f"teardown-{'ignore' if ignore else 'term'}-{n}"
                srt.append(srt_round(root, name, args.services, args.nodes, ignore))
                raw.append(raw_round(count, signal.SIGKILL if ignore else signal.SIGTERM))
            took = statistics.median(r["took"] for r in srt)
            base = statistics.median(raw)
            leaked = sum(len(r["left"]) for r in srt)
            if ignore:
                print(f"teardown of {count} services that ignore SIGTERM (grace {GRACE:g} s)")
                ignoring = statistics.median(r["ignoring"] for r in srt)
                escalated = statistics.median(r["escalated"] for r in srt)
                print(f"  ({ignoring:.0f} of {count} ignored SIGTERM; {escalated:.0f} escalated)")
            else:
                print(f"teardown of {count} services that honour SIGTERM")
            what = "SIGKILL" if ignore else "SIGTERM"
            print(f"  {'srt, stop_requested -> job_finished':38} {took * 1000:8.1f} ms")
            print(f"  {f'raw {what} to {count} groups + wait':38} {base * 1000:8.1f} ms")
            if ignore:
                budget = GRACE + 3 * base
                print(
                    f"  srt - grace = {(took - GRACE) * 1000:.1f} ms = {(took - GRACE) / base:.1f}x"
                    f" the raw SIGKILL loop (target: total <= {budget * 1000:.0f} ms,"
                    f" grace + 3x raw)"
                )
            else:
                print(f"  srt / raw: {took / base:.1f}x (target <= 3x)")
            each = {
                "srt": [round(r["took"] * 1000) for r in srt],
                "raw": [round(x * 1000) for x in raw],
            }
            print(f"  (medians of {args.rounds} rounds, in ms: {each})")
            codes = sorted({r["code"] for r in srt}, key=str)
            print(f"  srt exit codes {codes}; processes left behind: {leaked}")
    finally:
        drop_scratch(root, args.keep)


if __name__ == "__main__":
    main()
