"""Readiness detection: how soon after a port opens / a log line is written srt marks ready,
and what waiting probes cost the orchestrator.

Run from the repository root with the dev venv: ``.venv/bin/python bench/runtime_readiness.py``.

Latency: one service with N instances (one per virtual node, all probed at once) whose
program opens its port (tcp), starts an HTTP server (http) or writes a line (log) at a
known, staggered time and records ``time.time()`` right after ``listen()`` / before the
``write()``. Delay = the ``ready`` event's ``t`` minus that time. The raw baseline runs the
same programs without srt and detects them from this process with the same means (connect
on the same 5 ms -> 100 ms backoff, a plain HTTP GET, inotify), in the same run.

CPU: jobs whose probes never pass (the port never opens), with 1 and with 100 instances,
and an idle job (no probe) as the floor; the orchestrator's user+system CPU time (psutil)
over a window right after every probe started waiting.

Targets (issue 3): tcp/http median <= 60 ms, log median <= 5 ms (the original polls every
2 s: about 1 s median); 1 waiting probe <= 0.3 % of a core, 100 <= 10 %. Prints numbers,
asserts nothing; leaves nothing running.
"""

from __future__ import annotations

import argparse
import json
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
from srt_services.launch import process
from srt_services.testing.survivors import survivors

PY = [sys.executable, "-S"]
SRT = [sys.executable, "-m", "srt_services"]

# --------------------------------------------------------------------------- srt jobs


class Job:
    """One ``srt run --quiet`` in a subprocess, its events, and a cleanup that kills leftovers."""

    def __init__(self, root: Path, name: str, recipe: dict[str, Any], nodes: int | None = None):
        self.name = name
        self.dir = root / name
        self.recipe = root / f"{name}.json"
        self.recipe.write_text(json.dumps(recipe))
        self.nodes = nodes
        self.proc: subprocess.Popen[bytes] | None = None
        self.code: int | None = None

    def start(self) -> Job:
        argv = [*SRT, "run", str(self.recipe), "--job-dir", str(self.dir), "--quiet"]
        if self.nodes:
            argv += ["--nodes", str(self.nodes)]
        with open(self.dir.parent / f"{self.name}.out", "wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def events(self) -> list[dict[str, Any]]:
        out = []
        try:
            with open(self.dir / "events.jsonl", "rb") as fh:
                for line in fh:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        break
        except FileNotFoundError:
            pass
        return out

    def wait_for(
        self, done: Callable[[list[dict[str, Any]]], bool], timeout: float = 60.0
    ) -> list[dict[str, Any]]:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            if done(events):
                return events
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.dir.parent / f"{self.name}.out").read_text()[-2000:]
                raise RuntimeError(f"{self.name}: condition not met; srt output:\n{tail}")
            time.sleep(0.02)

    def count(self, event: str) -> Callable[[list[dict[str, Any]]], int]:
        return lambda evs: sum(1 for e in evs if e["event"] == event)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        self.code = self.proc.wait(timeout)
        return self.code

    def cleanup(self) -> list[str]:
        """Kill whatever is left (srt itself, then anything with the job's cookie)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.dir.exists():
            return []
        left = survivors(str(self.dir))
        state = self.dir / "state.json"
        if left and state.exists():
            cookie = json.loads(state.read_text()).get("cookie")
            for pid, _ in process.pids_with_cookie(cookie):
                process.signal_pid(pid, signal.SIGKILL)
        return left


def by_event(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == name]


def ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    qs = statistics.quantiles(values, n=10) if len(values) > 1 else values * 9
    return (
        f"median {statistics.median(values) * 1000:7.2f} ms  p90 {qs[8] * 1000:7.2f} ms"
        f"  max {max(values) * 1000:7.2f} ms  (n={len(values)})"
    )


# --------------------------------------------------------------------------- programs

#: Opens its port / serves HTTP / writes its ready line ``delay`` seconds after it started,
#: and records time.time() of that moment in <out_dir>/<SRT_INSTANCE>.
PROGRAM = r"""
import http.server, os, signal, socket, sys, time
mode, delay, out_dir, host = sys.argv[1:5]
port = int(sys.argv[5])
# "K/N": sample K of N, stratified over one 100 ms period (the probes' backoff cap) after 0.3 s
k, n = (int(x) for x in delay.split("/"))
delay = 0.3 + 0.1 * (k + 0.5) / n
name = os.environ["SRT_INSTANCE"]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
time.sleep(delay)
if mode == "log":
    t = time.time()
    os.write(1, b"srt-bench READY\n")
elif mode == "tcp":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(64)
    t = time.time()
else:
    srv = http.server.HTTPServer((host, port), H)
    t = time.time()
with open(os.path.join(out_dir, name), "w") as fh:
    fh.write(repr(t))
if mode == "http":
    srv.serve_forever()
while True:
    signal.pause()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def read_time(path: Path) -> float:
    return float(path.read_text())


# --------------------------------------------------------------------------- latency


def srt_latency(root: Path, mode: str, samples: int, prog: Path, parallel: bool) -> list[float]:
    """``parallel``: one service, one instance per virtual node, all probed at once;
    otherwise one service per sample, each gating the next (one probe at a time)."""
    marks = root / f"marks-{mode}-{int(parallel)}"
    marks.mkdir()

    def probe(port: int) -> dict[str, Any]:
        kinds: dict[str, Any] = {
            "tcp": {"tcp": {"port": port}},
            "http": {"http": {"port": port, "path": "/health"}},
            "log": {"log": {"pattern": "srt-bench READY"}},
        }
        return {**kinds[mode], "timeout_seconds": 30}

    def command(delay: str, port: int) -> list[str]:
        return [*PY, str(prog), mode, delay, str(marks), "{node_ip}", str(port)]

    services: list[dict[str, Any]]
    if parallel:
        port = free_port()
        services = [
            {
                "name": "probe",
                "nodes": samples,
                "command": command(f"{{index}}/{samples}", port),
                "readiness": probe(port),
                "stop_grace_seconds": 2,
            }
        ]
    else:
        services = []
        for i in range(samples):
            port = free_port()
            services.append(
                {
                    "name": f"s{i}",
                    "command": command(f"{i}/{samples}", port),
                    "readiness": probe(port),
                    "stop_grace_seconds": 2,
                }
            )
    name = f"ready-{mode}-{'parallel' if parallel else 'serial'}"
    recipe = {
        "schema": 2,
        "name": name,
        "services": services,
        "benchmark": {"type": "command", "command": ["true"]},
    }
    job = Job(root, name, recipe)
    try:
        job.start()
        job.wait(120)
        events = job.events()
    finally:
        leaked = job.cleanup()
    if job.code != 0:
        raise RuntimeError(f"{name} failed with {job.code}: {(root / f'{name}.out').read_text()}")
    if leaked:
        print(f"  LEAKED after {name}: {leaked}")
    out = []
    for ev in by_event(events, "ready"):
        mark = marks / ev["step"]
        if ev["unit"] != "benchmark" and mark.exists():
            out.append(ev["t"] - read_time(mark))
    return out


def _raw_poll(mode: str, host: str, port: int, started: float) -> float:
    """Connect (and GET) on the 5 ms -> 100 ms backoff until it works; return the time."""
    attempt = 0
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0) as s:
                if mode == "http":
                    s.sendall(b"GET /health HTTP/1.0\r\nHost: x\r\n\r\n")
                    if not s.recv(64).startswith(b"HTTP/1.0 200"):
                        raise OSError("bad status")
                return time.time()
        except OSError:
            pass
        if time.monotonic() - started > 30:
            raise RuntimeError(f"raw {mode} probe of {host}:{port} never passed")
        time.sleep(min(0.005 * 2**attempt, 0.1))
        attempt += 1


def raw_latency(root: Path, mode: str, samples: int, prog: Path) -> list[float]:
    """The same programs without srt, detected from here (threads or inotify)."""
    port = free_port()
    marks = root / f"raw-marks-{mode}"
    marks.mkdir()
    logs = root / f"raw-logs-{mode}"
    logs.mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    seen: dict[int, float] = {}
    watcher = None
    if mode == "log":
        from inotify_simple import INotify, flags

        watcher = INotify()
        watcher.add_watch(str(logs), flags.MODIFY)
    try:
        started = time.monotonic()
        for i in range(samples):
            host = f"127.0.0.{i + 1}"
            with open(logs / f"{i}.out", "wb") as out:
                procs.append(
                    subprocess.Popen(
                        [*PY, str(prog), mode, f"{i}/{samples}", str(marks), host, str(port)],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        env={**os.environ, "SRT_INSTANCE": f"raw_{i}"},
                    )
                )
        if watcher is not None:
            while len(seen) < samples and time.monotonic() - started < 30:
                for ev in watcher.read(timeout=1000):
                    now = time.time()
                    i = int(ev.name.split(".")[0])
                    if i not in seen and b"READY" in (logs / ev.name).read_bytes():
                        seen[i] = now
        else:

            def poll(i: int) -> None:
                seen[i] = _raw_poll(mode, f"127.0.0.{i + 1}", port, started)

            threads = [threading.Thread(target=poll, args=(i,)) for i in range(samples)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not all((marks / f"raw_{i}").exists() for i in seen):
            time.sleep(0.01)  # a log line is written before its time is recorded
    finally:
        for p in procs:
            process.signal_group(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
        if watcher is not None:
            watcher.close()
    return [seen[i] - read_time(marks / f"raw_{i}") for i in sorted(seen)]


# --------------------------------------------------------------------------- CPU


def cpu_cost(root: Path, window: float) -> dict[str, float]:
    """% of one core the orchestrator uses while 0, 1 and 100 probes wait."""
    port = free_port()

    def recipe(name: str, nodes: int | None, probe: bool) -> dict[str, Any]:
        service: dict[str, Any] = {"name": "waits", "command": ["sleep", "600"]}
        if nodes:
            service["nodes"] = nodes
        if probe:
            service["readiness"] = {"tcp": {"port": port}, "timeout_seconds": 300}
        service["stop_grace_seconds"] = 2
        return {"schema": 2, "name": name, "services": [service]}

    jobs = {
        "idle (1 service, no probe)": (Job(root, "cpu-idle", recipe("cpu-idle", None, False)), 0),
        "1 waiting tcp probe": (Job(root, "cpu-1", recipe("cpu-1", None, True)), 1),
        "100 waiting tcp probes": (Job(root, "cpu-100", recipe("cpu-100", 100, True)), 100),
    }
    out: dict[str, float] = {}
    try:
        for job, _ in jobs.values():
            job.start()
        for job, waiting in jobs.values():
            if waiting:
                job.wait_for(lambda evs, n=waiting: len(by_event(evs, "waiting")) >= n)
            else:
                job.wait_for(lambda evs: bool(by_event(evs, "serving")))
        procs = {label: psutil.Process(job.pid) for label, (job, _) in jobs.items()}
        before = {label: p.cpu_times() for label, p in procs.items()}
        t0 = time.monotonic()
        time.sleep(window)
        elapsed = time.monotonic() - t0
        for label, p in procs.items():
            now = p.cpu_times()
            used = (now.user - before[label].user) + (now.system - before[label].system)
            out[label] = 100.0 * used / elapsed
        for job, _ in jobs.values():
            job.signal()
        for job, _ in jobs.values():
            job.wait(60)
    finally:
        for job, _ in jobs.values():
            leaked = job.cleanup()
            if leaked:
                print(f"  LEAKED after {job.name}: {leaked}")
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10, help="Samples per probe kind.")
    parser.add_argument(
        "--parallel", type=int, default=16, help="Also probe this many at once (0: skip)."
    )
    parser.add_argument("--window", type=float, default=10.0, help="CPU window (s).")
    parser.add_argument("--keep", action="store_true", help="Keep the job directories.")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="srt-bench-ready-"))
    prog = root / "program.py"
    prog.write_text(PROGRAM)
    print("readiness detection: ready event t - the time the port opened / the line was written")
    try:
        medians: dict[str, tuple[float, float]] = {}
        for mode, target in (("tcp", 0.060), ("http", 0.060), ("log", 0.005)):
            serial = srt_latency(root, mode, args.samples, prog, parallel=False)
            raw = raw_latency(root, mode, args.samples, prog)
            medians[mode] = (statistics.median(serial), statistics.median(raw))
            print(
                f"  {mode:4} srt, one at a time   {ms(serial)}   target median <= {target * 1000:.0f} ms"
            )
            if args.parallel:
                together = srt_latency(root, mode, args.parallel, prog, parallel=True)
                print(f"  {mode:4} srt, {args.parallel:3} at once     {ms(together)}")
            print(f"  {mode:4} raw (same schedule) {ms(raw)}")
        ratios = ", ".join(f"{m} {a / b:.2f}x" for m, (a, b) in medians.items() if b > 0)
        print(f"  ratio srt/raw of the medians: {ratios}")
        print("  original (2 s poll): about 1000 ms median")
        print(f"waiting-probe CPU cost (orchestrator user+system over {args.window:g} s)")
        for label, pct in cpu_cost(root, args.window).items():
            target = {
                "1 waiting tcp probe": " (target <= 0.3 %)",
                "100 waiting tcp probes": " (target <= 10 %)",
            }
            print(f"  {label:28} {pct:6.2f} % of a core{target.get(label, '')}")
    finally:
        if args.keep:
            print(f"job directories kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
