"""What the runtime benchmarks share: an ``srt run`` in a subprocess, its event log, and a
cleanup that kills whatever it left, so a broken build cannot leave processes behind.

Imported by the ``runtime_*`` scripts of this folder (they run with ``bench/`` on
``sys.path``); not a benchmark itself.
"""

from __future__ import annotations

import json
import shutil
import signal
import statistics
import subprocess
import sys
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


def drop_scratch(path: Path | None, keep: bool) -> None:
    """Remove a benchmark's scratch directory, or say where it is when ``--keep`` asked."""
    if path is None:
        return
    if keep:
        print(f"job directories kept in {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)
