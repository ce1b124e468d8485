"""Ray readiness: when srt sees a Ray head ready and the cluster formed, against a raw poll
of the same endpoints every 50 ms, in the same run.

For each round a Ray service is started (``srt run`` here: the head alone; ``--slurm``: a
pool of two nodes on a throw-away 3-node netns Slurm cluster, ``srt apply``). From the
moment srt launched the head (its ``launched`` event), two clocks run:

* head: srt's ``ready`` event of the head (its probe: ``GET /api/version`` answers 200)
  against the first 200 the raw poller got from the same URL;
* fleet: srt's ``fleet_ready`` event against the first poll at which the same conditions
  held: every instance's log says ``Ray runtime started`` (the members' own readiness and
  the head's part of the gate) and ``GET /api/v0/nodes`` counts every member ALIVE. When
  the node list alone first counted them is printed too: Ray lists a node ALIVE a little
  before its ``ray start`` has finished starting.

The raw poller is a thread of this process: ``urllib`` GETs and a read of the head's log,
every 50 ms. Target: srt <= 1.1 x raw + one poll interval (50 ms), for both. Prints numbers;
asserts nothing. Needs Ray (``pip install 'srt-ray[ray]'``); ``--slurm`` needs root.

    .venv/bin/python bench/ray_readiness.py [--rounds 3] [--slurm] [--keep]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _jobs import Job, by_event, drop_scratch
from srt_services.testing.jobs import free_port

ROOT = Path(__file__).resolve().parents[1]
POLL = 0.05
READY_LINE = "Ray runtime started"
TARGET_RATIO = 1.1


class RawPoller(threading.Thread):
    """Polls the head's dashboard (and log) every :data:`POLL` seconds, noting when each
    condition first held (wall clock, like srt's events)."""

    def __init__(self, url: str, logs: list[Path], members: int) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.logs = logs
        self.members = members
        self.head: float | None = None
        self.alive: float | None = None
        self.fleet: float | None = None
        self.started_line = False
        self.halt = threading.Event()

    def _get(self, path: str) -> Any:
        try:
            with urllib.request.urlopen(self.url + path, timeout=1.0) as r:
                return json.load(r) if r.status == 200 else None
        except (OSError, ValueError):
            return None

    def _alive(self) -> int:
        doc = self._get("/api/v0/nodes?limit=10000")
        try:
            return sum(n["state"] == "ALIVE" for n in doc["data"]["result"]["result"])
        except (TypeError, KeyError):
            return 0

    def run(self) -> None:
        tick = time.monotonic()
        while not self.halt.is_set() and self.fleet is None:
            if self.head is None and self._get("/api/version") is not None:
                self.head = time.time()
            if self.head is not None:
                if not self.started_line:
                    self.started_line = all(_says(log, READY_LINE) for log in self.logs)
                if self._alive() >= self.members:
                    now = time.time()
                    if self.alive is None:
                        self.alive = now
                    if self.started_line:
                        self.fleet = now
            tick += POLL
            self.halt.wait(max(0.0, tick - time.monotonic()))


def _says(log: Path, line: str) -> bool:
    try:
        return line in log.read_text(errors="replace")
    except OSError:
        return False


def recipe(members: int, dash: int, port: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": "ray",
        "type": "ray",
        "options": {"port": port, "dashboard_port": dash, "num_cpus": 1, "num_gpus": 0},
    }
    if members == 1:
        entry["placement"] = {"node": "head"}
        entry["args"] = [
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
        ]
    else:
        entry["nodes"] = members
    return {
        "schema": 2,
        "name": "bench-ray",
        "slurm": {"signal_before_end_seconds": 0},
        "frontend": {"type": "none"},
        "resources": {"gpus_per_node": 1},
        "services": [entry],
        "benchmark": {"type": "command", "command": ["sleep", "1000"]},
    }


def measure(events: list[dict[str, Any]], poller: RawPoller, head_step: str) -> dict[str, float]:
    t0 = next(e["t"] for e in by_event(events, "launched") if e["step"] == head_step)
    head = next(e["t"] for e in by_event(events, "ready") if e["step"] == head_step)
    fleet = by_event(events, "fleet_ready")[0]["t"]
    assert poller.head is not None
    assert poller.fleet is not None
    assert poller.alive is not None
    return {
        "srt_head": head - t0,
        "raw_head": poller.head - t0,
        "srt_fleet": fleet - t0,
        "raw_fleet": poller.fleet - t0,
        "raw_alive": poller.alive - t0,
    }


def local_round(base: Path, i: int) -> dict[str, float]:
    dash, port = free_port(), free_port()
    # a job id of its own: the head's temp dir is /tmp/srt-<job id>/..., shared machine-wide
    job = Job(base, f"ray{i}-{secrets.token_hex(3)}", recipe(1, dash, port))
    poller = RawPoller(f"http://127.0.0.1:{dash}", [job.dir / "logs" / "service_ray.out"], 1)
    poller.start()
    job.start()
    try:
        events = job.wait_for(lambda evs: bool(by_event(evs, "fleet_ready")), timeout=300)
        poller.join(10)
        return measure(events, poller, "service_ray")
    finally:
        poller.halt.set()
        job.stop(60)
        job.report_problems(job.cleanup())


def load_cluster_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "slurm_cluster", ROOT / "scripts" / "slurm_cluster.py"
    )
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["slurm_cluster"] = mod
    spec.loader.exec_module(mod)
    return mod


def slurm_round(base: Path, i: int, cluster: Any) -> dict[str, float]:
    env = cluster.env()
    path = base / f"ray{i}.json"
    path.write_text(json.dumps(recipe(2, 8265, 6379)))
    job_dir = base / f"ray{i}"
    out = subprocess.run(
        [sys.executable, "-m", "srt_services", "apply", str(path), "-o", str(job_dir), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    job_id = json.loads(out.stdout)["job_id"]
    # the plan names the head (written by the orchestrator before it launches anything)
    plan_file = job_dir / "plan.json"
    deadline = time.monotonic() + 120
    while not plan_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    plan = json.loads(plan_file.read_text())
    instances = next(u for u in plan["units"] if u["name"] == "ray")["instances"]
    head = instances[0]
    logs = [job_dir / i["log"] for i in instances]
    poller = RawPoller(f"http://{head['node_ip']}:8265", logs, 2)
    poller.start()
    events_file = job_dir / "events.jsonl"
    try:
        deadline = time.monotonic() + 300
        while True:
            events = (
                [json.loads(x) for x in events_file.read_text().splitlines()]
                if events_file.exists()
                else []
            )
            if by_event(events, "fleet_ready"):
                break
            if by_event(events, "job_finished") or time.monotonic() > deadline:
                raise RuntimeError((job_dir / "logs" / "sbatch.out").read_text())
            time.sleep(0.1)
        poller.join(10)
        return measure(events, poller, head["step"])
    finally:
        poller.halt.set()
        subprocess.run(["scancel", job_id], env=env, check=False)
        deadline = time.monotonic() + 60
        while not (job_dir / "result.json").exists() and time.monotonic() < deadline:
            time.sleep(0.3)
        shutil.rmtree(f"/tmp/srt-{job_id}", ignore_errors=True)


def report(rounds: list[dict[str, float]], members: int) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    print(f"\nmedians over {len(rounds)} round(s), {members} Ray node(s), from srt's launch:")
    for what, srt_key, raw_key in (
        ("head ready (/api/version 200)", "srt_head", "raw_head"),
        ("fleet formed (log lines + nodes ALIVE)", "srt_fleet", "raw_fleet"),
    ):
        srt, raw = med(srt_key), med(raw_key)
        bound = TARGET_RATIO * raw + POLL
        print(
            f"  {what:40s} srt {srt:7.3f} s   raw 50 ms poll {raw:7.3f} s   ratio {srt / raw:.3f}x"
            f"   (srt - raw {1000 * (srt - raw):+6.0f} ms)   target <= {bound:.3f} s:"
            f" {'yes' if srt <= bound else 'NO'}"
        )
    print(
        f"  (raw, the node list alone: every node ALIVE at {med('raw_alive'):.3f} s; the rest of"
        " the fleet time is the ray starts finishing)"
    )
    met = all(
        r["srt_head"] <= TARGET_RATIO * r["raw_head"] + POLL
        and r["srt_fleet"] <= TARGET_RATIO * r["raw_fleet"] + POLL
        for r in rounds
    )
    print(f"  every round within target: {'yes' if met else 'no'}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--slurm", action="store_true", help="two Ray nodes on a netns Slurm cluster")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    base = Path(tempfile.mkdtemp(prefix="srt-bench-ray-", dir="/tmp"))
    os.chmod(base, 0o755)
    rounds: list[dict[str, float]] = []
    cluster_dir = base / "cluster"
    sc = cluster = None
    try:
        if args.slurm:
            sc = load_cluster_module()
            cluster = sc.up(cluster_dir, nodes=3, mode="netns", name="bry", timeout=60, smoke=True)
        for i in range(args.rounds):
            r = slurm_round(base, i, cluster) if args.slurm else local_round(base, i)
            rounds.append(r)
            print(
                f"round {i}: head srt {r['srt_head']:.3f} s raw {r['raw_head']:.3f} s;"
                f" fleet srt {r['srt_fleet']:.3f} s raw {r['raw_fleet']:.3f} s"
                f" (nodes ALIVE {r['raw_alive']:.3f} s)",
                flush=True,
            )
        report(rounds, 2 if args.slurm else 1)
    finally:
        if sc is not None:
            sc.down(cluster_dir)
        drop_scratch(base, args.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
