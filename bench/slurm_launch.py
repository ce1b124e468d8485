"""Slurm launcher: per-instance launch overhead and teardown time, against raw baselines.

Brings up a throw-away 3-node Slurm cluster (scripts/slurm_cluster.py, network namespaces),
renders an `srt apply` job of 30 instances (10 services x 3 nodes) and, in the same
allocation before srt starts, a raw loop of 30 `srun --overlap` steps launched the same way
(concurrently, from one process). Each task records `time.time()` when it starts.

* launch overhead per instance: task start - the moment it was launched (srt: the `launched`
  event; raw: just before Popen). Target: srt median <= 1.5x raw.
* teardown: `stop_requested` -> `job_finished` for the 30 steps, against the cluster's
  KillWait (5 s here): the whole teardown must fit inside it.

Prints numbers; asserts nothing. Needs root (it starts Slurm). Run:
    .venv/bin/python bench/slurm_launch.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SERVICES, NODES = 10, 3

RAW = r"""
import json, os, subprocess, sys, time
nodes = os.environ["NODES"].split(",")
out = os.environ["RAW_OUT"]
task = "import time,sys; print(time.time(), flush=True); time.sleep(0.5)"
procs = []
for i in range(int(os.environ["COUNT"])):
    node = nodes[i % len(nodes)]
    t0 = time.time()
    p = subprocess.Popen(
        ["srun", "--jobid=" + os.environ["SLURM_JOB_ID"], "--overlap", "--nodes=1", "--ntasks=1",
         "--nodelist=" + node, "--job-name=raw_%d" % i, "--export=ALL", sys.executable, "-c", task],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    procs.append((t0, p))
deltas = []
for t0, p in procs:
    line = p.communicate()[0].split()
    deltas.append(float(line[0]) - t0)
json.dump(deltas, open(out, "w"))
"""


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


def recipe_text(work: Path) -> str:
    task = (
        "import os,time; open(os.environ['SRT_JOB_DIR']+'/start-'+os.environ['SRT_INSTANCE'],'w')"
        ".write(repr(time.time())); time.sleep(1000)"
    )
    lines = [
        "schema: 2",
        "name: benchslurm",
        "slurm: {signal_before_end_seconds: 0}",
        "observability: {metrics: false}",
        "services:",
    ]
    lines.append(
        f"  - {{name: s0, nodes: {NODES}, command: [{sys.executable}, -c, {json.dumps(task)}]}}"
    )
    for i in range(1, SERVICES):
        lines.append(
            f"  - {{name: s{i}, placement: {{pool: s0}}, command: [{sys.executable}, -c, {json.dumps(task)}]}}"
        )
    wait = f"while [ $(ls $SRT_JOB_DIR | grep -c '^start-') -lt {SERVICES * NODES} ]; do sleep 0.05; done; sleep 0.2"
    lines.append(f"  - {{name: end, terminal: true, command: [bash, -c, {json.dumps(wait)}]}}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    sc = load_cluster_module()
    base = Path(tempfile.mkdtemp(prefix="srt-bench-slurm-", dir="/tmp"))
    os.chmod(base, 0o755)
    cluster_dir = base / "cluster"
    cluster = sc.up(cluster_dir, nodes=NODES, mode="netns", name="bsl", timeout=60, smoke=True)
    env = cluster.env()
    try:
        recipe = base / "recipe.yaml"
        recipe.write_text(recipe_text(base))
        job_dir = base / "job"
        out = subprocess.run(
            [sys.executable, "-m", "srt_services", "render", str(recipe), "-o", str(job_dir)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        script = Path(out.stdout.strip())
        body = script.read_text().splitlines()
        raw = base / "raw.py"
        raw.write_text(RAW)
        insert = [
            f'NODES=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd,) COUNT={SERVICES * NODES}'
            f" RAW_OUT={base / 'raw.json'} {sys.executable} {raw}",
        ]
        body = body[:-1] + insert + body[-1:]
        script.write_text("\n".join(body) + "\n")
        job_id = subprocess.run(
            ["sbatch", "--parsable", str(script)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout.strip()
        deadline = time.monotonic() + 180
        while not (job_dir / "result.json").exists():
            if time.monotonic() > deadline:
                print(
                    "job did not finish; sbatch.out:\n"
                    + (job_dir / "logs" / "sbatch.out").read_text()
                )
                return 1
            time.sleep(0.5)
        events = [json.loads(line) for line in (job_dir / "events.jsonl").read_text().splitlines()]
        launched = {e["step"]: e["t"] for e in events if e["event"] == "launched"}
        srt = []
        for step, t in launched.items():
            start = job_dir / f"start-{step}"
            if start.exists():
                srt.append(float(start.read_text()) - t)
        raw_deltas = json.loads((base / "raw.json").read_text())
        stop = next(e["mono"] for e in events if e["event"] == "stop_requested")
        end = next(e["mono"] for e in events if e["event"] == "job_finished")
        first, last = min(launched.values()), max(launched.values())
        ms = lambda xs: statistics.median(xs) * 1000  # noqa: E731
        print(f"slurm launcher, {SERVICES * NODES} instances on {NODES} nodes (job {job_id})")
        print(
            f"  launch -> task running, median  srt {ms(srt):7.1f} ms   raw srun --overlap {ms(raw_deltas):7.1f} ms"
            f"   ratio {statistics.median(srt) / statistics.median(raw_deltas):.2f}x (target <= 1.5x)"
        )
        print(
            f"  srt first -> last launched: {(last - first) * 1000:.1f} ms for {len(launched)} steps"
        )
        print(
            f"  teardown of {SERVICES * NODES} steps: {(end - stop):.2f} s; KillWait {cluster.kill_wait} s"
            f" -> {((end - stop) / cluster.kill_wait) * 100:.0f} % of KillWait (must be < 100 %)"
        )
        result = json.loads((job_dir / "result.json").read_text())
        print(f"  job exit code {result['exit_code']}")
    finally:
        sc.down(cluster_dir)
        if not args.keep:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
