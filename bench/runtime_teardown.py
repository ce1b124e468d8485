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
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srt_services.launch import process
from srt_services.testing.survivors import survivors

PY = [sys.executable, "-S"]
SRT = [sys.executable, "-m", "srt_services"]
Events = list[dict[str, Any]]

# --------------------------------------------------------------------------- srt jobs


class Job:
    """One ``srt run --quiet`` in a subprocess, its events, and a cleanup that kills leftovers."""

    def __init__(self, root: Path, name: str, recipe: dict[str, Any], nodes: int | None = None):
        self.name = name
        self.dir = root / name
        self.out = root / f"{name}.out"
        self.recipe = root / f"{name}.json"
        self.recipe.write_text(json.dumps(recipe))
        self.nodes = nodes
        self.proc: subprocess.Popen[bytes] | None = None
        self.code: int | None = None
        self.hung = False

    def start(self) -> Job:
        argv = [*SRT, "run", str(self.recipe), "--job-dir", str(self.dir), "--quiet"]
        if self.nodes:
            argv += ["--nodes", str(self.nodes)]
        with open(self.out, "wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def events(self) -> Events:
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

    def wait_for(self, done: Callable[[Events], bool], timeout: float = 60.0) -> Events:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            if done(events):
                return events
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: condition not met; srt said:\n{self.tail()}")
            time.sleep(0.02)

    def tail(self) -> str:
        return self.out.read_text(errors="replace")[-2000:] if self.out.exists() else ""

    def wait(self, timeout: float = 60.0) -> int | None:
        """Wait for srt to exit; ``None`` (and ``hung``) if it did not within ``timeout``."""
        assert self.proc is not None
        try:
            self.code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.hung = True
            return None
        return self.code

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM srt (a user's Ctrl-C) and wait for it to finish its teardown."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

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

    def report_problems(self, leaked: list[str]) -> None:
        if self.hung:
            print(f"  !! {self.name}: srt did not exit after SIGTERM (killed; see bench/README.md)")
        if leaked:
            print(f"  !! {self.name}: {len(leaked)} process(es) left behind, e.g. {leaked[0]}")


def by_event(events: Events, name: str) -> Events:
    return [e for e in events if e["event"] == name]


def ms(values: list[float]) -> str:
    if not values:
        return "n/a"
    p90 = (
        statistics.quantiles(values, n=10, method="inclusive")[8] if len(values) > 1 else values[0]
    )
    return (
        f"median {statistics.median(values) * 1000:7.2f} ms  p90 {p90 * 1000:7.2f} ms"
        f"  max {max(values) * 1000:7.2f} ms  (n={len(values)})"
    )


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
    return {"schema": 2, "name": name, "services": specs}


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
        if args.keep:
            print(f"job directories kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
