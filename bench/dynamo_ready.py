"""Dynamo under srt: from ``srt run`` to the first successful chat completion, against the
same processes started by a plain Python script; and what srt costs while the job serves.

Run from the repository root with a venv that holds srt, srt-dynamo and Dynamo 1.6.1
(``plugins/dynamo/README.md``; the ``dynamo`` tox environment is one):
``.venv/bin/python bench/dynamo_ready.py`` (about three minutes for 5 samples). Prints
numbers, asserts nothing, leaves nothing running.

The job: etcd, NATS (the request plane; ``--plane tcp`` drops it), Dynamo's frontend and
one aggregated mocker worker on a tiny local model, all on fresh free ports per sample.

Start-up. srt: ``srt run`` in a subprocess. Raw: a plain Python script (standard library
only, in a subprocess of its own too) that starts the very processes of srt's plan (argv,
environment and files taken from ``srt dry-run --local --json`` of the same recipe, with
srt's directories swapped for its own), in the order srt starts them (etcd, then NATS, then
the worker, then the frontend), and polls the same readiness endpoints every 10 ms before
starting the next: etcd ``/health``, NATS ``/healthz``, the worker's ``/health`` saying ``ready``,
the model listed in the frontend's ``/v1/models``. In both cases the bench process itself
posts a one-token chat completion every 20 ms from just before the subprocess starts, and
the time is the first 200. srt and raw samples alternate, so drift of this shared machine
hits both alike. Target (issue 25): median srt / median raw <= 1.1. The time is also split
at the first process launched (srt's ``launched`` event; the script's own clock), so srt's
start-up (importing, loading and checking the recipe, planning) shows apart from the
supervision that follows, and the CPU time the supervising process itself had used by the
first 200 is printed: unlike wall time, it does not depend on what else the machine runs.
srt's own packages are byte-compiled first, as an installed srt is (``compile_srt``).

Serving. Once a sample serves, a chat completion is sent every 100 ms for ``--window``
seconds, and the CPU time of the supervising process (every thread, from ``schedstat``) is
taken over that window: srt's orchestrator (the ``srt run`` process), and the raw script,
which only sleeps until it is told to stop; the baseline is no supervisor at all, 0 %.
Target (issue 25): srt <= 1 % of one core.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _jobs import SRT, Job, drop_scratch

MODEL = "tiny"
CHAT = json.dumps(
    {"model": MODEL, "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}
).encode()

# The plain script: starts each phase's processes, polls their endpoints every 10 ms, says
# "serving", then waits for SIGTERM and stops them (SIGTERM per group, SIGKILL after 30 s).
RAW = r"""
import json, os, signal, subprocess, sys, time, urllib.request
spec = json.load(open(sys.argv[1]))
pids = open(sys.argv[2], "w")
procs = []

def ready(check):
    try:
        with urllib.request.urlopen(check["url"], timeout=2) as r:
            body = r.read(65536)
            status = r.status
    except OSError:
        return False
    if status != check["status"]:
        return False
    if "json" not in check:
        return True
    data = json.loads(body)
    if check["json"] == "status":
        return data.get("status") == check["equals"]
    return any(m.get("id") == check["equals"] for m in data.get("data", []))

stopping = []
signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
stop = lambda: bool(stopping)
print("first launch", time.monotonic(), flush=True)
for phase in spec:
    for inst in phase:
        for d in inst["dirs"]:
            os.makedirs(d, exist_ok=True)
        for path, text in inst["files"].items():
            with open(path, "w") as fh:
                fh.write(text)
        with open(inst["log"], "wb") as out:
            p = subprocess.Popen(inst["argv"], env={**os.environ, **inst["env"]}, cwd=inst["cwd"],
                                 stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(p)
        pids.write(f"{p.pid}\n")
        pids.flush()
    for inst in phase:
        while not stop() and not ready(inst["ready"]):
            if any(p.poll() is not None for p in procs):
                sys.exit("a process exited before it was ready")
            time.sleep(0.01)
print("serving", flush=True)
while not stop():
    signal.pause()
for p in reversed(procs):
    try:
        os.killpg(p.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
for p in reversed(procs):
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
"""


# --------------------------------------------------------------------------- ports, recipe


def _free(port: int) -> bool:
    for host in ("0.0.0.0", "127.0.0.1"):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def free_ports(count: int) -> list[int]:
    """``count`` consecutive free ports below 32767 (Dynamo reads DYN_SYSTEM_PORT as an i16)."""
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(20000, 32000)
        if all(_free(base + i) for i in range(count)):
            return [base + i for i in range(count)]
    raise RuntimeError("no block of free ports")


def recipe(name: str, model: Path, plane: str) -> dict[str, Any]:
    etcd, peer, nats, monitor, system, http = free_ports(6)
    services: list[dict[str, Any]] = [
        {"name": "etcd", "type": "etcd", "options": {"client_port": etcd, "peer_port": peer}}
    ]
    if plane == "nats":
        services.append(
            {"name": "nats", "type": "nats", "options": {"port": nats, "monitor_port": monitor}}
        )
    return {
        "schema": 2,
        "name": name,
        "observability": {"metrics": False},
        "resources": {"gpus_per_node": 1},
        "engine": {
            "type": "mocker",
            "model": str(model),
            "options": {"mocker": {"speedup_ratio": 10}, "ports": {"system": system}},
        },
        "dynamo": {"request_plane": plane},
        "frontend": {"type": "dynamo", "port": http},
        "roles": {"agg": {"workers": 1}},
        "services": services,
    }


# --------------------------------------------------------------------------- chat, CPU


def chat_ok(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/chat/completions", CHAT, {"content-type": "application/json"})
        response = conn.getresponse()
        response.read()
        return response.status == 200
    except OSError:
        return False
    finally:
        conn.close()


def first_chat(port: int, t0: float, alive: Any, timeout: float = 120.0) -> float:
    """Seconds from ``t0`` to the first 200, polling every 20 ms."""
    while not chat_ok(port):
        if not alive():
            raise RuntimeError("the job ended before it served")
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"no chat completion within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - t0


def ran_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` from schedstat (ns resolution)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total += int(fh.read().split()[0])
        except FileNotFoundError:
            continue
    return total / 1e9


def serving_cpu(pid: int, port: int, window: float) -> tuple[float, int]:
    """% of one core ``pid`` used while a chat completion is sent every 100 ms, and how
    many of them failed."""
    failed = 0
    before = ran_seconds(pid)
    t0 = time.monotonic()
    while time.monotonic() - t0 < window:
        failed += not chat_ok(port)
        time.sleep(0.1)
    elapsed = time.monotonic() - t0
    return 100.0 * (ran_seconds(pid) - before) / elapsed, failed


# --------------------------------------------------------------------------- the two sides


Sample = tuple[float, float, float, float]


def srt_sample(root: Path, name: str, body: dict[str, Any], window: float) -> Sample:
    """(seconds to the first chat, seconds of it before the first process launched, CPU
    seconds srt had used by the first chat, CPU % while serving)."""
    port = body["frontend"]["port"]
    job = Job(root, name, body)
    t0 = time.monotonic()
    job.start()
    try:
        assert job.proc is not None
        proc = job.proc
        took = first_chat(port, t0, lambda: proc.poll() is None)
        used = ran_seconds(job.pid)
        first = min(float(e["mono"]) for e in job.events() if e["event"] == "launched")
        cpu, failed = serving_cpu(job.pid, port, window)
        if failed:
            print(f"  !! {name}: {failed} chat completion(s) failed while serving")
        if job.stop(90) is None:
            print(f"  !! {name}: srt did not exit after SIGTERM")
        return took, first - t0, used, cpu
    finally:
        job.report_problems(job.cleanup())


def plan_of(root: Path, name: str, body: dict[str, Any]) -> dict[str, Any]:
    path = root / f"{name}.json"
    path.write_text(json.dumps(body))
    out = subprocess.run(
        [*SRT, "dry-run", "--local", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    plan: dict[str, Any] = json.loads(out.stdout)
    return plan


def raw_spec(plan: dict[str, Any], run_dir: Path) -> list[list[dict[str, Any]]]:
    """The plan's instances in the groups srt starts and gates together, with srt's
    directories replaced by the raw run's own (``<job_dir>`` and the node-local directory)."""
    local = str(run_dir / "local")
    job = str(run_dir / "job")

    def here(text: str) -> str:
        return text.replace("<job_dir>", job).replace(plan["local_dir"], local)

    units = {u["name"]: u for u in plan["units"]}
    groups: list[list[str]] = []
    for phase in ("infra", "before_workers", "workers", "frontend", "after_frontend"):
        names = plan["phases"][phase]
        # services start in declared order, each gated on the one before (srt's rule, see
        # docs/user-guide.md); a phase's roles start together
        groups += [[n] for n in names] if phase not in ("workers", "frontend") else [names]
    phases: list[list[dict[str, Any]]] = []
    for group in groups:
        insts: list[dict[str, Any]] = []
        for unit_name in group:
            for inst in units[unit_name]["instances"]:
                work = here(inst["work_dir"])
                ready = inst["readiness"]["config"]
                check: dict[str, Any] = {"url": ready["url"], "status": ready["status"]}
                if ready.get("body"):
                    check.update(json=ready["body"]["json"], equals=ready["body"]["equals"])
                insts.append(
                    {
                        "argv": [here(a) for a in inst["argv"]],
                        "env": {k: here(v) for k, v in inst["env"].items()},
                        "files": {os.path.join(work, p): here(t) for p, t in inst["files"].items()},
                        "dirs": [work, os.path.join(local, inst["step"])],
                        "cwd": here(inst["cwd"]) if inst["cwd"] else work,
                        "log": str(run_dir / f"{inst['step']}.log"),
                        "ready": check,
                    }
                )
        if insts:
            phases.append(insts)
    return phases


def raw_sample(root: Path, name: str, body: dict[str, Any], window: float) -> Sample:
    port = body["frontend"]["port"]
    run_dir = root / name
    run_dir.mkdir()
    spec = run_dir / "spec.json"
    spec.write_text(json.dumps(raw_spec(plan_of(root, name, body), run_dir)))
    pids = run_dir / "pids"
    out = open(run_dir / "launcher.out", "wb")  # noqa: SIM115 - closed in finally
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", RAW, str(spec), str(pids)],
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        took = first_chat(port, t0, lambda: proc.poll() is None)
        used = ran_seconds(proc.pid)
        cpu, failed = serving_cpu(proc.pid, port, window)
        if failed:
            print(f"  !! {name}: {failed} chat completion(s) failed while serving")
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)
        out.flush()
        said = (run_dir / "launcher.out").read_text().split()
        first = float(said[said.index("launch") + 1])
        return took, first - t0, used, cpu
    finally:
        out.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        leaked = 0
        for line in pids.read_text().split() if pids.exists() else []:
            try:
                os.killpg(int(line), signal.SIGKILL)
                leaked += 1
            except ProcessLookupError:
                pass
        if leaked:
            print(f"  !! {name}: {leaked} process group(s) of the raw run were still there")


# --------------------------------------------------------------------------- main


def compile_srt() -> list[str]:
    """Byte-compile srt's own packages (core and every ``srt_*`` plugin), as ``pip install``
    does for a wheel, and return their names.

    An editable install compiles nothing: each module is compiled at its first import and
    the ``.pyc`` written then, unless ``PYTHONDONTWRITEBYTECODE`` is set (tox sets it, and
    so may a shared machine's environment), in which case every ``srt run`` of a checkout
    recompiles the modules changed since their last ``.pyc`` (some 150-200 ms of a fresh
    branch's start-up). That measures the checkout, not srt: the other side's code (the
    standard library, Dynamo's installed wheel) is compiled already. Measured as installed.
    """
    import pkgutil

    found = sorted(
        (m.name, os.path.join(getattr(m.module_finder, "path", ""), m.name))
        for m in pkgutil.iter_modules()
        if m.ispkg and m.name.startswith("srt_")
    )
    subprocess.run(
        # the plugin template's files are Jinja, not Python (pip skips what fails too)
        [sys.executable, "-m", "compileall", "-q", "-x", "/_template/", *(p for _, p in found)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return [name for name, _ in found]


def tiny_model(root: Path) -> Path:
    model = root / "models" / MODEL
    subprocess.run([sys.executable, "-m", "srt_dynamo.tiny_model", str(model)], check=True)
    return model


def summary(label: str, values: list[float], unit: str, scale: float = 1.0) -> str:
    shown = ", ".join(f"{v * scale:.{2 if unit == '%' else 0}f}" for v in values)
    return f"{label:5s} median {statistics.median(values) * scale:8.2f} {unit}   ({shown})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=5, help="per side (default 5)")
    parser.add_argument("--window", type=float, default=10.0, help="serving window, seconds")
    parser.add_argument("--plane", choices=("nats", "tcp"), default="nats")
    parser.add_argument("--keep", action="store_true", help="keep the job directories")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="srt-bench-dynamo-"))
    srt_t: list[float] = []
    raw_t: list[float] = []
    srt_up: list[float] = []
    raw_up: list[float] = []
    srt_used: list[float] = []
    raw_used: list[float] = []
    srt_cpu: list[float] = []
    raw_cpu: list[float] = []
    try:
        print(f"byte-compiled: {', '.join(compile_srt())}", flush=True)
        model = tiny_model(root)
        for i in range(args.samples):
            took, up, used, cpu = srt_sample(
                root, f"srt{i}", recipe(f"srt{i}", model, args.plane), args.window
            )
            srt_t.append(took)
            srt_up.append(up)
            srt_used.append(used)
            srt_cpu.append(cpu)
            took, up, used, cpu = raw_sample(
                root, f"raw{i}", recipe(f"raw{i}", model, args.plane), args.window
            )
            raw_t.append(took)
            raw_up.append(up)
            raw_used.append(used)
            raw_cpu.append(cpu)
            print(
                f"sample {i}: srt {srt_t[-1] * 1000:.0f} ms (first launch at"
                f" {srt_up[-1] * 1000:.0f}), raw {raw_t[-1] * 1000:.0f} ms (first launch at"
                f" {raw_up[-1] * 1000:.0f}); CPU srt {srt_cpu[-1]:.2f} %,"
                f" raw script {raw_cpu[-1]:.2f} %",
                flush=True,
            )
    finally:
        drop_scratch(root, args.keep)
    ratio = statistics.median(srt_t) / statistics.median(raw_t)
    print(f"\nstart -> first chat completion ({args.plane} plane), {args.samples} samples per side")
    print(summary("srt", srt_t, "ms", 1000))
    print(summary("raw", raw_t, "ms", 1000))
    print(f"ratio {ratio:.3f} (target <= 1.1)")
    print("of which before the first process was launched (srt: load, check, plan):")
    print(summary("srt", srt_up, "ms", 1000))
    print(summary("raw", raw_up, "ms", 1000))
    srt_after = [t - u for t, u in zip(srt_t, srt_up, strict=True)]
    raw_after = [t - u for t, u in zip(raw_t, raw_up, strict=True)]
    after = statistics.median(srt_after) / statistics.median(raw_after)
    print("from the first launch to the first chat completion:")
    print(summary("srt", srt_after, "ms", 1000))
    print(summary("raw", raw_after, "ms", 1000))
    print(f"ratio {after:.3f}")
    print("CPU time of the supervising process itself up to the first chat completion:")
    print(summary("srt", srt_used, "ms", 1000))
    print(summary("raw", raw_used, "ms", 1000))
    print(f"\nsupervisor CPU while serving ({args.window:.0f} s window, 10 chats/s), % of a core")
    print(summary("srt", srt_cpu, "%"))
    print(summary("raw", raw_cpu, "%"))
    print("none  0 % (no supervisor)   target: srt <= 1 %")


if __name__ == "__main__":
    main()
