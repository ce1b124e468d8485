"""Launching 200 trivial services: how long srt takes from the first launch to the last,
against a raw ``Popen`` loop of the same 200 commands, and what supervising them costs the
orchestrator (threads, memory).

Run from the repository root with the dev venv: ``.venv/bin/python bench/runtime_launch.py``
(about 20 s). Prints numbers, asserts nothing, leaves nothing running.

The job: 50 services of ``sleep 1000`` on a pool of 4 virtual nodes (one instance per node:
200 instances), no probe, no benchmark; ``srt run --quiet``. Launch time = the ``mono`` of
the last ``launched`` event minus the first. Raw baselines in the same run: a loop of 200
``subprocess.Popen(argv, start_new_session=True)`` (bare), and the same with what srt does
per child besides (a log file to append to, an explicit environment, ``close_fds``).
Supervision cost, read with psutil once every instance runs: the orchestrator's thread count
and its RSS with 200 instances minus its RSS with 1, per extra instance.

Targets (issue 3): launch <= 1.5x the raw Popen loop; no thread per child; <= 50 KB per
service.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from _jobs import Job, by_event, drop_scratch
from srt_services.launch import process
from srt_services.testing.survivors import survivors

# --------------------------------------------------------------------------- the job


def sleepers(name: str, services: int, nodes: int) -> dict[str, Any]:
    """``services`` services of ``sleep 1000``, each with an instance on every pool node."""
    specs: list[dict[str, Any]] = []
    for i in range(services):
        spec: dict[str, Any] = {"name": f"s{i}", "command": ["sleep", "1000"]}
        if nodes > 1:
            if i == 0:
                spec["nodes"] = nodes
            else:
                spec["placement"] = {"pool": "s0"}
        spec["stop_grace_seconds"] = 5
        specs.append(spec)
    return {"schema": 2, "name": name, "observability": {"metrics": False}, "services": specs}


def srt_round(root: Path, name: str, services: int, nodes: int) -> dict[str, float]:
    expected = services * nodes
    job = Job(root, name, sleepers(name, services, nodes))
    try:
        job.start()
        events = job.wait_for(lambda evs: bool(by_event(evs, "serving")))
        me = psutil.Process(job.pid)
        threads = me.num_threads()
        rss = me.memory_info().rss
        fds = me.num_fds()
        launched = [e["mono"] for e in by_event(events, "launched")]
        job.stop()
        left = survivors(str(job.dir))
    finally:
        job.report_problems(job.cleanup())
    if len(launched) != expected:
        print(f"  !! {name}: {len(launched)} launched, expected {expected}")
    return {
        "span": max(launched) - min(launched),
        "threads": threads,
        "rss": rss,
        "fds": fds,
        "left": len(left),
    }


def raw_round(root: Path, count: int, like_srt: bool) -> float:
    """Seconds for a loop of ``count`` Popen calls (then the children are killed)."""
    logs = root / "raw-logs"
    logs.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        t0 = time.perf_counter()
        for i in range(count):
            if like_srt:
                fd = os.open(logs / f"{i}.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                try:
                    procs.append(
                        subprocess.Popen(
                            ["sleep", "1000"],
                            env={**env, "SRT_INSTANCE": f"raw_{i}"},
                            stdin=subprocess.DEVNULL,
                            stdout=fd,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                            close_fds=True,
                        )
                    )
                finally:
                    os.close(fd)
            else:
                procs.append(subprocess.Popen(["sleep", "1000"], start_new_session=True))
        return time.perf_counter() - t0
    finally:
        for p in procs:
            process.signal_group(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--services", type=int, default=50, help="Services (x nodes instances).")
    parser.add_argument("--nodes", type=int, default=4, help="Virtual nodes of the pool.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="Keep the job directories.")
    args = parser.parse_args()
    count = args.services * args.nodes
    root = Path(tempfile.mkdtemp(prefix="srt-bench-launch-"))
    # the same job with its job directory on tmpfs: what the filesystem adds (creating
    # logs/<step>.out and work/<step>/ for every instance)
    shm = (
        Path(tempfile.mkdtemp(prefix="srt-bench-launch-", dir="/dev/shm"))
        if Path("/dev/shm").is_dir()
        else None
    )
    try:
        one = srt_round(root, "launch-1", 1, 1)
        rounds, on_shm = [], []
        bare: list[float] = []
        like: list[float] = []
        for n in range(args.rounds):
            rounds.append(srt_round(root, f"launch-{count}-{n}", args.services, args.nodes))
            if shm is not None:
                on_shm.append(srt_round(shm, f"launch-{count}-{n}", args.services, args.nodes))
            bare.append(raw_round(root, count, like_srt=False))
            like.append(raw_round(root, count, like_srt=True))
        span = statistics.median(r["span"] for r in rounds)
        b, lk = statistics.median(bare), statistics.median(like)

        def row(label: str, seconds: float, each: int = count) -> str:
            return f"  {label:36} {seconds * 1000:8.1f} ms  ({seconds / each * 1e6:5.0f} us each)"

        print(
            f"launch of {count} services ({args.services} x {args.nodes} virtual nodes), no probe"
        )
        print(row(f"srt, first to last launched ({fs_of(root)})", span))
        if on_shm:
            print(row("srt, job directory on tmpfs", statistics.median(r["span"] for r in on_shm)))
        print(row("raw Popen loop", b))
        print(row(f"raw Popen loop + log/env/fds ({fs_of(root)})", lk))
        print(f"  srt / raw Popen loop: {span / b:.2f}x (target <= 1.5x)")
        if on_shm:
            tmpfs = statistics.median(r["span"] for r in on_shm)
            print(f"  srt on tmpfs / raw Popen loop: {tmpfs / b:.2f}x")
        print(f"  srt / raw loop like srt: {span / lk:.2f}x")
        rounded = {
            "srt": [round(r["span"] * 1000) for r in rounds],
            "srt tmpfs": [round(r["span"] * 1000) for r in on_shm],
            "raw": [round(x * 1000) for x in bare],
            "raw like srt": [round(x * 1000) for x in like],
        }
        print(f"  (medians of {args.rounds} rounds, in ms: {rounded})")
        threads = max(r["threads"] for r in rounds)
        fds = statistics.median(r["fds"] for r in rounds)
        rss = statistics.median(r["rss"] for r in rounds)
        per = (rss - one["rss"]) / (count - 1)
        print("orchestrator while they run")
        print(f"  threads: {threads:.0f} with {count} children, {one['threads']:.0f} with 1")
        print(f"  open fds: {fds:.0f} with {count} children, {one['fds']:.0f} with 1")
        print(f"  RSS: {rss / 2**20:.1f} MiB with {count}, {one['rss'] / 2**20:.1f} MiB with 1")
        print(f"  memory per service: {per / 1024:.1f} KiB (target <= 50 KB)")
        left = [int(r["left"]) for r in [one, *rounds, *on_shm]]
        print(f"  processes left after each run: {left}")
    finally:
        for path in (root, shm):
            drop_scratch(path, args.keep)


def fs_of(path: Path) -> str:
    """The filesystem type ``path`` is on (from /proc/mounts)."""
    best, kind = "", "?"
    with open("/proc/mounts") as fh:
        for line in fh:
            parts = line.split()
            mount = parts[1]
            if str(path).startswith(mount.rstrip("/") + "/") and len(mount) > len(best):
                best, kind = mount, parts[2]
    return kind


if __name__ == "__main__":
    main()
