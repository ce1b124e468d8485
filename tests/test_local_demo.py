"""``examples/local-demo.yaml`` end to end: the example the README's first command runs.

The recipe is run as users run it (``srt run`` in a subprocess, from the repository root),
with its three ports swapped for free ones so that parallel sessions on one machine do not
collide. Every test ends with the no-survivors check.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from srt_services.testing.jobs import JobRun, start_srt
from srt_services.testing.survivors import assert_no_survivors

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "examples" / "local-demo.yaml"
#: The ports written in the recipe: frontend, registry, workers (both roles).
RECIPE_PORTS = ("18000", "18100", "18200")
PHASES = ["infra", "before_workers", "workers", "frontend", "after_frontend", "benchmark"]
PHASE_UNITS = {
    "infra": ["registry"],
    "before_workers": ["vocab"],
    "workers": ["prefill", "decode"],
    "frontend": ["frontend"],
    "after_frontend": ["stats-logger"],
    "benchmark": ["benchmark"],
}


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(taken: set[int]) -> int:
    """A port free on both virtual nodes' addresses (127.0.0.1 and 127.0.0.2)."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in taken and _bindable("127.0.0.2", port):
            return port
    raise RuntimeError("no free port found")


@dataclass
class Demo:
    recipe: Path
    frontend_port: int
    registry_port: int
    worker_port: int


def demo_recipe(tmp_path: Path, requests: int | None = None) -> Demo:
    """The example recipe with free ports (and optionally another request count)."""
    text = RECIPE.read_text()
    taken: set[int] = set()
    ports = []
    for literal in RECIPE_PORTS:
        assert literal in text, f"{literal} no longer appears in {RECIPE}"
        port = free_port(taken)
        taken.add(port)
        ports.append(port)
        text = text.replace(literal, str(port))
    if requests is not None:
        assert "--requests, 64," in text
        text = text.replace("--requests, 64,", f"--requests, {requests},")
    path = tmp_path / "local-demo.yaml"
    path.write_text(text)
    return Demo(path, *ports)


@pytest.fixture
def job_dir(tmp_path: Path) -> Iterator[str]:
    path = str(tmp_path / "job")
    yield path
    assert_no_survivors(path)


def run_demo(demo: Demo, job_dir: str) -> JobRun:
    # the copy lives in tmp_path; its programs stay next to the original ({recipe_dir})
    return start_srt(
        ["run", str(demo.recipe)],
        job_dir,
        cwd=str(ROOT),
        env={"SRT_RECIPE_DIR": str(RECIPE.parent)},
    )


def _by_event(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == name]


def test_demo_runs_end_to_end(tmp_path: Path, job_dir: str) -> None:
    demo = demo_recipe(tmp_path)
    run = run_demo(demo, job_dir).wait(90)
    assert run.code == 0, f"{run.stdout}\n{run.stderr}"
    assert run.result()["exit_code"] == 0
    assert run.result()["cause"]["kind"] == "benchmark_exit"

    bench = run.log("benchmark")
    assert "summary: requests=64 ok=64 bad=0 tokens=1024 " in bench, bench
    assert "p50=" in bench
    assert "p99=" in bench
    assert "all 64 answers correct" in bench

    events = run.events()
    # every phase, in order, and each phase is ready before the next one starts
    started = _by_event(events, "phase_started")
    assert [e["phase"] for e in started] == PHASES
    assert {e["phase"]: e["units"] for e in started} == PHASE_UNITS
    position = {id(e): n for n, e in enumerate(events)}
    phase_of_step: dict[str, str] = {}
    for e in _by_event(events, "launched"):
        unit_phase = next(p for p, units in PHASE_UNITS.items() if e["unit"] in units)
        phase_of_step[e["step"]] = unit_phase
    ready = {e["step"]: e for e in _by_event(events, "ready")}
    steps = {"service_registry", "service_vocab", "prefill_0", "decode_0", "frontend"}
    steps |= {"service_stats-logger", "benchmark"}
    assert set(ready) == set(phase_of_step) == steps
    for n, phase in enumerate(PHASES[:-1]):
        next_start = position[id(started[n + 1])]
        for step, p in phase_of_step.items():
            if p == phase:
                assert position[id(ready[step])] < next_start, (step, PHASES[n + 1])

    # two virtual nodes: prefill on node0 (127.0.0.1), decode on node1 (127.0.0.2), same port
    launched = {e["step"]: e for e in _by_event(events, "launched")}
    assert launched["prefill_0"]["node"] == "node0"
    assert launched["decode_0"]["node"] == "node1"
    assert f"listening on http://127.0.0.1:{demo.worker_port}" in run.log("prefill_0")
    assert f"listening on http://127.0.0.2:{demo.worker_port}" in run.log("decode_0")
    assert "vocab ready" in run.log("service_vocab")
    assert "requests=64" in run.log("service_stats-logger")

    # the job ended through the one teardown, and everything exited on SIGTERM
    finished = _by_event(events, "job_finished")
    assert len(finished) == 1
    assert finished[0]["code"] == 0
    assert not _by_event(events, "escalated")
    tiers = [e["tier"] for e in _by_event(events, "stopping_tier")]
    assert tiers == sorted(tiers)
    for step in ready:
        exits = [e for e in _by_event(events, "exited") if e["step"] == step]
        assert [e["code"] for e in exits] == [0], (step, exits)


def _served(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=2) as resp:
        return int(json.loads(resp.read())["requests"])


def test_decode_killed_mid_benchmark_fails_the_job(tmp_path: Path, job_dir: str) -> None:
    demo = demo_recipe(tmp_path, requests=1_000_000)
    run = run_demo(demo, job_dir)
    try:
        run.wait_event("launched", step="benchmark", timeout=60)
        decode_pid = run.wait_event("launched", step="decode_0")["pid"]
        # mid-benchmark: the frontend has answered some requests already
        deadline = time.monotonic() + 30
        served = 0
        while served < 20:
            assert time.monotonic() < deadline, "the benchmark never got going"
            with contextlib.suppress(OSError, ValueError, KeyError):
                served = _served(demo.frontend_port)
            time.sleep(0.02)
        os.kill(decode_pid, signal.SIGKILL)
        run.wait(60)
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()
    assert run.code == 1, f"{run.stdout}\n{run.stderr}"
    cause = run.result()["cause"]
    assert cause["kind"] == "critical_service_exit"
    assert (cause["unit"], cause["step"], cause["node"]) == ("decode", "decode_0", "node1")
    assert cause["signal"] == signal.SIGKILL
    assert "worker decode_0 exited on node1" in cause["message"]
    assert "decode_0" in run.stderr
    assert "SIGKILL" in run.stderr

    events = run.events()
    stop = _by_event(events, "stop_requested")
    assert [e["cause"]["step"] for e in stop] == ["decode_0"]
    decode_exit = next(e for e in _by_event(events, "exited") if e["step"] == "decode_0")
    assert decode_exit["signal"] == signal.SIGKILL
    assert events.index(decode_exit) < events.index(stop[0])
    # the benchmark was still running: teardown stopped it
    bench_exit = next(e for e in _by_event(events, "exited") if e["step"] == "benchmark")
    assert events.index(bench_exit) > events.index(stop[0])
    assert _by_event(events, "job_finished")[0]["code"] == 1
