"""Running ``srt`` in a subprocess from tests, the way users run it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class JobRun:
    """A finished (or running) ``srt run``."""

    job_dir: str
    proc: subprocess.Popen[str]
    stdout: str = ""
    stderr: str = ""
    code: int | None = None
    elapsed: float = 0.0
    _t0: float = field(default_factory=time.monotonic)

    def wait(self, timeout: float = 120.0) -> JobRun:
        try:
            self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.stdout, self.stderr = self.proc.communicate()
            raise AssertionError(f"srt run did not finish within {timeout}s:\n{self.stdout}\n{self.stderr}") from None
        self.code = self.proc.returncode
        self.elapsed = time.monotonic() - self._t0
        return self

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def events(self) -> list[dict[str, Any]]:
        from srt_services.supervise.jobdir import read_events

        return read_events(os.path.join(self.job_dir, "events.jsonl"))

    def result(self) -> dict[str, Any]:
        with open(os.path.join(self.job_dir, "result.json"), "rb") as fh:
            data: dict[str, Any] = json.loads(fh.read())
            return data

    def state(self) -> dict[str, Any]:
        with open(os.path.join(self.job_dir, "state.json"), "rb") as fh:
            data: dict[str, Any] = json.loads(fh.read())
            return data

    def log(self, step: str) -> str:
        with open(os.path.join(self.job_dir, "logs", f"{step}.out"), encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def wait_event(self, event: str, timeout: float = 30.0, **match: Any) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ev in self.events():
                if ev.get("event") == event and all(ev.get(k) == v for k, v in match.items()):
                    return ev
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"no {event} {match} event; events: {self.events()}")


def start_srt(
    args: list[str], job_dir: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> JobRun:
    """Start ``srt <args> --job-dir job_dir --plain`` without waiting."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    argv = [sys.executable, "-m", "srt_services", *args, "--job-dir", job_dir, "--plain"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd,
        start_new_session=True,
    )
    return JobRun(job_dir=job_dir, proc=proc)


def run_recipe(path: str, job_dir: str, *extra: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> JobRun:
    return start_srt(["run", path, *extra], job_dir, env=env).wait(timeout)
