"""Running ``srt`` in a subprocess from tests, the way users run it."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Every ``srt run`` started through :func:`start_srt` in this process, so a test session can
#: stop the ones a failed test left behind (see :func:`stop_leftover_runs`).
STARTED: list[JobRun] = []


def stop_leftover_runs() -> int:
    """Stop every started ``srt run`` still alive; return how many there were."""
    alive = [r for r in STARTED if r.proc.poll() is None]
    for run in alive:
        run.stop()
    STARTED.clear()
    return len(alive)


@dataclass
class JobRun:
    """A finished (or running) ``srt run``, as ``srt_jobs.run``/``start`` return it: what a
    plugin's runtime test asserts on, so each part says where it comes from.

    ``code`` is the exit status (``None`` while it runs), ``stdout``/``stderr`` what it
    printed (filled by :meth:`wait`); :meth:`log` reads ``logs/<step>.out`` (a service's
    step is ``service_<name>``), :meth:`events` the job's ``events.jsonl`` (dicts with
    ``event`` and ``step``), :meth:`result` and :meth:`state` its ``result.json`` and
    ``state.json``. Documented for authors in docs/plugin-authors.md ("Testing with the
    kit").
    """

    job_dir: str
    proc: subprocess.Popen[str]
    stdout: str = ""
    stderr: str = ""
    code: int | None = None
    elapsed: float = 0.0
    #: Events already in the job directory when this run started (a re-run appends).
    event_offset: int = 0
    _t0: float = field(default_factory=time.monotonic)

    def stop(self, grace: float = 30.0) -> None:
        """End this ``srt run`` if it still runs: SIGTERM, then SIGKILL after ``grace``."""
        if self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def wait(self, timeout: float = 120.0) -> JobRun:
        try:
            self.stdout, self.stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.stdout, self.stderr = self.proc.communicate()
            raise AssertionError(
                f"srt run did not finish within {timeout}s:\n{self.stdout}\n{self.stderr}"
            ) from None
        self.code = self.proc.returncode
        self.elapsed = time.monotonic() - self._t0
        return self

    def signal(self, sig: int = signal.SIGTERM) -> None:
        self.proc.send_signal(sig)

    def events(self) -> list[dict[str, Any]]:
        from srt_services.jobdir.events import read_events

        return read_events(os.path.join(self.job_dir, "events.jsonl"))[self.event_offset :]

    def result(self) -> dict[str, Any]:
        with open(os.path.join(self.job_dir, "result.json"), "rb") as fh:
            data: dict[str, Any] = json.loads(fh.read())
            return data

    def state(self) -> dict[str, Any]:
        with open(os.path.join(self.job_dir, "state.json"), "rb") as fh:
            data: dict[str, Any] = json.loads(fh.read())
            return data

    def log(self, step: str) -> str:
        with open(
            os.path.join(self.job_dir, "logs", f"{step}.out"), encoding="utf-8", errors="replace"
        ) as fh:
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
    from srt_services.jobdir.events import read_events

    offset = len(read_events(os.path.join(job_dir, "events.jsonl")))
    full_env = dict(os.environ)
    full_env.update(env or {})
    argv = [sys.executable, "-m", "srt_services", *args, "--job-dir", job_dir, "--plain"]
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    run = JobRun(job_dir=job_dir, proc=proc, event_offset=offset)
    STARTED.append(run)
    return run


def run_srt(
    *args: str,
    env: dict[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """``srt ARGS`` in a subprocess, as a user's shell runs it (this process's environment
    with ``env`` over it), its output captured; a command that hangs fails at ``timeout``."""
    return subprocess.run(
        [sys.executable, "-m", "srt_services", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def run_recipe(
    path: str, job_dir: str, *extra: str, timeout: float = 120.0, env: dict[str, str] | None = None
) -> JobRun:
    return start_srt(["run", path, *extra], job_dir, env=env).wait(timeout)


def run_venv_srt(recipe: str, tmp: Path, timeout: float = 120.0) -> JobRun:
    """``srt run`` the way the user of a fresh venv runs it, and what it left.

    The venv's ``srt`` script is called by its path (the venv never activated) with a PATH
    holding nothing but bash (what srt runs a preamble with) and no site config, so a server
    that answers was found by its kind's own look-up (PATH, then the venv's ``bin``), never
    through the caller's shell. The recipe is written to ``tmp/recipe.yaml`` and the job
    directory is ``tmp/job``; the job is checked for survivors before this returns, whether
    it finished or not.
    """
    from srt_services.testing.survivors import assert_no_survivors

    only_bash = tmp / "path"
    only_bash.mkdir()
    (only_bash / "bash").symlink_to("/bin/bash")
    path = tmp / "recipe.yaml"
    path.write_text(recipe, encoding="utf-8")
    job = str(tmp / "job")
    srt = str(Path(sys.executable).parent / "srt")
    proc = subprocess.Popen(
        [srt, "run", str(path), "--job-dir", job, "--plain"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"HOME": str(tmp), "PATH": str(only_bash), "SRT_SITE_CONFIG": os.devnull},
    )
    run = JobRun(job_dir=job, proc=proc)
    try:
        return run.wait(timeout)
    finally:
        assert_no_survivors(job)


_counter = itertools.count()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Jobs:
    """Start ``srt run`` on recipe text; every job is checked for survivors at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.job_dirs: list[str] = []
        self.runs: list[JobRun] = []

    def recipe(self, text: str) -> str:
        path = self.tmp / f"recipe{next(_counter)}.yaml"
        path.write_text(textwrap.dedent(text))
        return str(path)

    def start(
        self, text: str, *args: str, env: dict[str, str] | None = None, job_dir: str | None = None
    ) -> JobRun:
        recipe = self.recipe(text)
        job = job_dir or str(self.tmp / f"job{next(_counter)}")
        self.job_dirs.append(job)
        run = start_srt(["run", recipe, *args], job, env=env)
        self.runs.append(run)
        return run

    def finish(self) -> list[str]:
        """End every ``srt run`` a test left running (a failed test), then list survivors.

        The orchestrator goes first: killing its services while it lives would only make it
        restart them."""
        still_running = [r for r in self.runs if r.proc.poll() is None]
        for run in still_running:
            run.stop()
        left: list[str] = []
        from srt_services.testing.survivors import assert_no_survivors

        for job in dict.fromkeys(self.job_dirs):
            try:
                assert_no_survivors(job)
            except AssertionError as exc:
                left.append(str(exc))
        if still_running:
            left.insert(
                0,
                f"{len(still_running)} srt run process(es) were still running at the end of the test",
            )
        return left

    def run(self, text: str, *args: str, timeout: float = 60.0, **kw: Any) -> JobRun:
        return self.start(text, *args, **kw).wait(timeout)


def plugin_env(site: Path, dist: str, modules: dict[str, str], entry: str) -> dict[str, str]:
    """Install a plugin for ``srt run`` subprocesses, without pip: ``modules`` (module name ->
    source) and a ``<dist>`` distribution whose ``srt.plugins`` entry point is ``entry``
    are written into ``site``; returns the environment (``PYTHONPATH``) that makes an srt
    subprocess load it exactly like an installed plugin.
    """
    site.mkdir(parents=True, exist_ok=True)
    for name, source in modules.items():
        (site / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    info = site / f"{dist.replace('-', '_')}-1.0.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(f"[srt.plugins]\n{dist} = {entry}\n", encoding="utf-8")
    (info / "RECORD").write_text("", encoding="utf-8")
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"PYTHONPATH": path}


def events_of(run: JobRun, name: str, **match: Any) -> list[dict[str, Any]]:
    return [
        e
        for e in run.events()
        if e["event"] == name and all(e.get(k) == v for k, v in match.items())
    ]


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, step: float = 0.02) -> Any:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("condition not met in time")
