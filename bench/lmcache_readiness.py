"""LMCache server readiness: when srt marks a real LMCache server ready, against a raw poll of
the same endpoint in the same run.

Run from the repository root with a venv that has srt, srt-lmcache and LMCache (CPU:
torch's CPU wheel, then ``lmcache``; the ``lmcache`` tox environment has all three):
``.tox/lmcache/bin/python bench/lmcache_readiness.py`` (about a minute with the default 3
rounds). Prints numbers, asserts nothing, leaves nothing running.

srt: a job whose only service is an ``lmcache-server`` (its own ports, a 0.25 GB L1) under
``srt run --quiet``; the time is the service's ``launched`` event to its ``ready`` event
(srt's http probe on ``/healthcheck``, through srt's preamble that checks for the binary).

Raw, two ways. (1) The same server instance: while srt waits, this process polls the same
``GET /healthcheck`` every 10 ms; the time is srt's ``launched`` event to its first 200
(one clock: both are CLOCK_MONOTONIC). This pairs the two on one start, so LMCache's own
start-up time, which varies by seconds on a shared machine, cancels out; the ratio srt /
raw of each round is the headline (issue 17's target: at most 1.1). (2) A separate start:
the same ``lmcache server`` command started with ``Popen`` from this process and polled
the same way; rounds alternate with srt's, but the spread of LMCache's start dwarfs what
srt adds, so these medians are context only.

Most of both numbers is LMCache importing torch and allocating its L1 (4-9 s here);
what srt adds is its launch (a bash preamble) and how soon its probe sees the answer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from _jobs import Job, by_event, drop_scratch

#: What LMCache must be told on this machine, whoever starts it.
ENV = {"LMCACHE_TRACK_USAGE": "false", "DO_NOT_TRACK": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def lmcache_binary() -> str:
    found = shutil.which("lmcache") or os.path.join(os.path.dirname(sys.executable), "lmcache")
    if not os.access(found, os.X_OK):
        sys.exit("bench/lmcache_readiness.py needs LMCache (pip install lmcache) in this venv")
    return found


def poll_until_healthy(url: str, deadline: float) -> float | None:
    """``time.monotonic()`` of the first 200 from ``url``, polling every 10 ms."""
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return time.monotonic()
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.01)
    return None


def srt_round(root: Path, n: int) -> tuple[float, float]:
    """(launched -> srt's ready, launched -> a 10 ms poll of the same server's endpoint)."""
    port, http_port = free_port(), free_port()
    url = f"http://127.0.0.1:{http_port}/healthcheck"
    seen: list[float | None] = []
    poller = threading.Thread(
        target=lambda: seen.append(poll_until_healthy(url, time.monotonic() + 300)), daemon=True
    )
    recipe = {
        "schema": 2,
        "name": f"lmc{n}",
        "observability": {"metrics": False},
        "services": [
            {
                "name": "lmc",
                "type": "lmcache-server",
                "placement": {"node": "head"},
                "options": {"port": port, "http_port": http_port, "l1_size_gb": 0.25},
            }
        ],
    }
    poller.start()
    job = Job(root, f"srt{n}", recipe).start()
    try:
        events = job.wait_for(lambda ev: bool(by_event(ev, "ready")), timeout=300)
        launched = by_event(events, "launched")[0]["mono"]
        ready = by_event(events, "ready")[0]["mono"]
        poller.join(300)
        job.stop(60)
        if not seen or seen[0] is None:
            raise RuntimeError("the side poll never saw the server healthy")
        return float(ready - launched), float(seen[0] - launched)
    finally:
        job.report_problems(job.cleanup())


def raw_round(root: Path, n: int, binary: str) -> float:
    port, http_port = free_port(), free_port()
    argv = [
        binary, "server", "--host", "127.0.0.1", "--port", str(port),
        "--http-host", "127.0.0.1", "--http-port", str(http_port),
        "--l1-size-gb", "0.25", "--eviction-policy", "LRU",
    ]  # fmt: skip
    url = f"http://127.0.0.1:{http_port}/healthcheck"
    with open(root / f"raw{n}.log", "wb") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **ENV},
            start_new_session=True,
        )  # fmt: skip
    try:
        while True:
            try:
                with urllib.request.urlopen(url, timeout=1) as resp:
                    if resp.status == 200:
                        return time.monotonic() - t0
            except (urllib.error.URLError, OSError):
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"lmcache exited with {proc.returncode}; see {log.name}")
            time.sleep(0.01)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the job directories")
    args = parser.parse_args()
    binary = lmcache_binary()
    root = Path(tempfile.mkdtemp(prefix="srt-bench-lmcache-"))
    srt: list[float] = []
    side: list[float] = []
    raw: list[float] = []
    try:
        for n in range(args.rounds):
            seen_by_srt, seen_by_poll = srt_round(root, n)
            srt.append(seen_by_srt)
            side.append(seen_by_poll)
            raw.append(raw_round(root, n, binary))
            print(
                f"round {n}: srt {srt[-1]:.3f} s (same server polled raw: {side[-1]:.3f} s)"
                f"   raw start {raw[-1]:.3f} s",
                flush=True,
            )
    finally:
        drop_scratch(root, args.keep)
    lag = [a - b for a, b in zip(srt, side, strict=True)]
    same = statistics.median(a / b for a, b in zip(srt, side, strict=True))
    print("\nSame server, launched -> healthy: srt's ready event vs a 10 ms raw poll")
    print(f"  ratio srt / raw poll: median {same:.4f}   (target <= 1.1)")
    print(
        f"  srt later than the raw poll by: median {statistics.median(lag) * 1000:.1f} ms"
        f"  [{min(lag) * 1000:.1f} - {max(lag) * 1000:.1f}]"
    )
    s, r = statistics.median(srt), statistics.median(raw)
    print(f"\nSeparate starts (srt's vs Popen's), median of {args.rounds} rounds")
    print(f"  srt (launched -> ready event): {s:.3f} s   [{min(srt):.3f} - {max(srt):.3f}]")
    print(
        f"  raw (Popen -> 200 on /healthcheck, 10 ms poll): {r:.3f} s   [{min(raw):.3f} - {max(raw):.3f}]"
    )
    paired = statistics.median(a / b for a, b in zip(srt, raw, strict=True))
    print(
        f"  ratio srt / raw: {s / r:.3f} of the medians, {paired:.3f} median of the rounds"
        "   (target <= 1.1)"
    )


if __name__ == "__main__":
    main()
