"""Slurm at scale: the steps launcher and the node-agent launcher side by side, one run.

Brings up (or reuses, ``--cluster-dir``) a netns test cluster of ``--nodes`` nodes
(scripts/slurm_cluster.py) and runs the same job shape with ``slurm.launcher: steps`` and
``slurm.launcher: agents``, at three shapes so that slopes can be fitted:
(nodes/2, 1 instance per node), (nodes, 1) and (nodes, ``--per-node``). Each instance is a
``bash`` that writes ``$EPOCHREALTIME`` and ``exec``s ``sleep``; the batch script writes its
own start time first (the moment the allocation runs it). For every job:

* launch: allocation (batch script start) -> the last instance running;
* batch-host memory while serving: the orchestrator and everything it started (the srun
  clients), plus, for the agents, the batch node's own agent; RSS and PSS summed (agents:
  once every agent has loaded its supervising half, which it does after the launches;
  when that was is printed, and the teardown is measured from then too);
* slurmctld's steps: how many steps the job has live while serving, and how many it had
  created by then (the highest step id + 1);
* teardown: ``srt stop`` -> ``job_finished`` (the orchestrator's events) and -> Slurm no
  longer lists the job, against KillWait;
* survivors: processes with the job's SLURM_JOB_ID or cookie once the job is gone.

Memory is fitted per launcher as ``a + b*nodes + c*instances`` from the three shapes and
extrapolated to 1,024 nodes with ``--per-node`` instances each; the launch time likewise.
Prints numbers; asserts nothing. Needs root. Run:

    .venv/bin/python bench/slurm_scale.py --nodes 64 --per-node 5
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_NODES = 1024


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


def recipe_text(name: str, launcher: str, nodes: int, per_node: int) -> str:
    task = 'echo $EPOCHREALTIME > "$SRT_JOB_DIR/start/$SRT_INSTANCE"; exec sleep 100000'
    lines = [
        "schema: 2",
        f"name: {name}",
        f"slurm: {{launcher: {launcher}, signal_before_end_seconds: 0}}",
        "observability: {metrics: false}",
        "services:",
        f"  - {{name: s0, nodes: {nodes}, command: [bash, -c, {json.dumps(task)}]}}",
    ]
    for i in range(1, per_node):
        lines.append(
            f"  - {{name: s{i}, placement: {{pool: s0}}, command: [bash, -c, {json.dumps(task)}]}}"
        )
    return "\n".join(lines) + "\n"


@dataclass
class Run:
    launcher: str
    nodes: int
    per_node: int
    job_id: str = ""
    launch_s: float = 0.0
    rss_mib: float = 0.0
    pss_mib: float = 0.0
    orch_rss_mib: float = 0.0
    srun_clients: int = 0
    agent_rss_mib: float = 0.0
    #: CPU seconds the batch host spent (the orchestrator, what it started and reaped, and
    #: the srun clients still running), from the batch script's start to serving: the part
    #: of the launch that stays serial on a real cluster, whose nodes have their own CPUs
    cpu_s: float = 0.0
    #: CPU seconds one node's agent spent by then (on a real cluster: on its own node)
    agent_cpu_s: float = 0.0
    live_steps: int = 0
    created_steps: int = 0
    teardown_s: float = 0.0
    gone_s: float = 0.0
    #: agents: allocation -> the last agent said it loaded its supervising half (the
    #: last write of its log, from its note)
    loaded_s: float = 0.0
    survivors: int = 0
    exit_code: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def instances(self) -> int:
        return self.nodes * self.per_node


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(x) for x in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += _children(p)
    return seen


def _mem(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of one process, KiB."""
    rss = pss = 0.0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = float(line.split()[1])
            elif line.startswith("Pss:"):
                pss = float(line.split()[1])
    except OSError:
        pass
    return rss, pss


def _cpu(pid: int, reaped: bool = False) -> float:
    """CPU seconds of one process (with ``reaped``: and of its waited-for children)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat[stat.rfind(")") + 2 :].split()
    ticks = sum(int(x) for x in fields[11 : 15 if reaped else 13])
    return ticks / os.sysconf("SC_CLK_TCK")


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _job_pids(job_id: str, conf: str, cookie: str | None) -> list[int]:
    want = {f"SLURM_JOB_ID={job_id}".encode(), f"SLURM_CONF={conf}".encode()}
    cookie_b = f"SRT_JOB_COOKIE={cookie}".encode() if cookie else None
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = set(Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"))
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2] in "ZX":
            continue
        if want <= env or (cookie_b is not None and cookie_b in env):
            out.append(int(entry))
    return out


def _events(job_dir: Path) -> list[dict[str, Any]]:
    try:
        text = (job_dir / "events.jsonl").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _steps(env: dict[str, str], job_id: str) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-s", "-j", job_id, "-o", "%i"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    ).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def _job_state(env: dict[str, str], job_id: str) -> str:
    out = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    ).stdout.strip()
    return out


def run_job(base: Path, env: dict[str, str], conf: str, run: Run, kill_wait: float) -> Run:
    name = f"scale-{run.launcher}-{run.nodes}x{run.per_node}"
    if (base / name).exists():  # --per-node 1: the dense shape repeats the full one
        name += "-again"
    recipe = base / f"{name}.yaml"
    recipe.write_text(recipe_text(name, run.launcher, run.nodes, run.per_node))
    job_dir = base / name
    rendered = subprocess.run(
        [sys.executable, "-m", "srt_services", "render", str(recipe), "-o", str(job_dir)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    script = Path(rendered.stdout.strip())
    (job_dir / "start").mkdir(parents=True, exist_ok=True)
    body = script.read_text().splitlines()
    at = next(i for i, line in enumerate(body) if not line.startswith("#"))
    body.insert(at, f"echo $EPOCHREALTIME > {job_dir}/allocated")
    script.write_text("\n".join(body) + "\n")
    run.job_id = subprocess.run(
        ["sbatch", "--parsable", str(script)], capture_output=True, text=True, env=env, check=True
    ).stdout.strip()
    deadline = time.monotonic() + 600
    seen_steps: set[str] = set()
    while not any(e["event"] == "serving" for e in _events(job_dir)):
        if time.monotonic() > deadline or (job_dir / "result.json").exists():
            run.notes.append("never served; see " + str(job_dir / "logs" / "sbatch.out"))
            return run
        seen_steps.update(_steps(env, run.job_id))
        time.sleep(0.5)
    t_serving = time.monotonic()
    starts = job_dir / "start"
    while len(os.listdir(starts)) < run.instances and time.monotonic() < deadline:
        time.sleep(0.1)
    allocated = float((job_dir / "allocated").read_text())
    last = max(float(p.read_text()) for p in starts.iterdir())
    run.launch_s = last - allocated
    time.sleep(2.0)  # let the start-up's transient processes (srun helpers) end
    if run.launcher == "agents":
        # an agent launches before it loads its supervising half (asyncio, the local
        # launcher), which it does once the launches are done: memory and teardown are
        # measured once every agent says it has (at most 30 s more)
        logs = job_dir / "logs"
        while time.monotonic() < deadline:
            said = [p.read_text() for p in logs.glob("srt-agent-n*.out")]
            if len(said) >= run.nodes and all("loaded; supervising" in t for t in said):
                run.loaded_s = max(p.stat().st_mtime for p in logs.glob("srt-agent-n*.out"))
                break
            if time.monotonic() - t_serving > 30:
                run.notes.append("not every agent said it loaded within 30 s")
                break
            time.sleep(0.1)
    live = _steps(env, run.job_id)
    seen_steps.update(live)
    run.live_steps = len(live)
    numbered = [int(s.split(".")[1]) for s in seen_steps if re.fullmatch(r"\d+\.\d+", s)]
    run.created_steps = max(numbered) + 1 if numbered else 0
    state = json.loads((job_dir / "state.json").read_text())
    orch = state["orchestrator"]["pid"]
    rss = pss = 0.0
    for pid in _tree(orch):
        r, p = _mem(pid)
        rss, pss = rss + r, pss + p
        run.cpu_s += _cpu(pid, reaped=pid == orch)
        if pid == orch:
            run.orch_rss_mib = r / 1024
        elif _comm(pid) == "srun":
            run.srun_clients += 1
    if run.launcher == "agents":
        log = (job_dir / "logs" / "srt-agent-n1.out").read_text()
        found = re.search(r"srt-agent\[(\d+)\]: serving n1", log)
        if found:
            r, p = _mem(int(found.group(1)))
            run.agent_rss_mib = r / 1024
            run.agent_cpu_s = _cpu(int(found.group(1)))
            rss, pss = rss + r, pss + p
    run.rss_mib, run.pss_mib = rss / 1024, pss / 1024
    if run.loaded_s:
        run.loaded_s -= allocated
    t0 = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "srt_services", "stop", str(job_dir)],
        capture_output=True,
        env=env,
        check=False,
    )
    while _job_state(env, run.job_id) not in ("", "COMPLETED", "CANCELLED", "FAILED"):
        if time.monotonic() - t0 > 300:
            run.notes.append("job still listed 300 s after srt stop")
            break
        time.sleep(0.1)
    run.gone_s = time.monotonic() - t0
    events = _events(job_dir)
    stop = next((e["mono"] for e in events if e["event"] == "stop_requested"), None)
    end = next((e["mono"] for e in events if e["event"] == "job_finished"), None)
    if stop is not None and end is not None:
        run.teardown_s = end - stop
    result = json.loads((job_dir / "result.json").read_text())
    run.exit_code = result["exit_code"]
    deadline = time.monotonic() + 30
    left = _job_pids(run.job_id, conf, state.get("cookie"))
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _job_pids(run.job_id, conf, state.get("cookie"))
    run.survivors = len(left)
    if run.teardown_s > kill_wait:
        run.notes.append(f"teardown {run.teardown_s:.2f}s > KillWait {kill_wait:g}s")
    return run


def fit(runs: list[Run], value: str) -> tuple[float, float, float]:
    """``value = a + b*nodes + c*instances`` through the three shapes (half, full, dense)."""
    half, full, dense = runs
    vh, vf, vd = (getattr(r, value) for r in runs)
    c = (vd - vf) / (dense.instances - full.instances)
    b = (vf - vh) / (full.nodes - half.nodes) - c * (full.per_node)
    a = vf - b * full.nodes - c * full.instances
    return a, b, c


def compile_srt() -> None:
    """Byte-compile srt's own packages, as ``pip install`` does for a wheel.

    A checkout compiles a module at its first import and writes the ``.pyc`` then, unless
    ``PYTHONDONTWRITEBYTECODE`` is set (tox sets it, and so may a shared machine's
    environment; the jobs inherit it): then every node agent of every job recompiles its
    first part (~20 ms of CPU each, which the steps launcher does not pay). That measures
    the checkout, not srt. Measured as installed (``bench/dynamo_ready.py`` does the same).
    """
    import pkgutil

    found = [
        os.path.join(getattr(m.module_finder, "path", ""), m.name)
        for m in pkgutil.iter_modules()
        if m.ispkg and m.name.startswith("srt_")
    ]
    subprocess.run(
        # the plugin template's files are Jinja, not Python
        [sys.executable, "-m", "compileall", "-q", "-x", "/_template/", *found],
        check=True,
        stdout=subprocess.DEVNULL,
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--per-node", type=int, default=5)
    ap.add_argument("--cluster-dir", help="reuse (or keep) the cluster in this directory")
    ap.add_argument("--keep", action="store_true", help="keep the job directories")
    args = ap.parse_args()
    compile_srt()
    sc = load_cluster_module()
    base = Path(tempfile.mkdtemp(prefix="srt-bench-scale-", dir="/tmp"))
    os.chmod(base, 0o755)
    cluster_dir = Path(args.cluster_dir) if args.cluster_dir else base / "cluster"
    t0 = time.monotonic()
    cluster = sc.up(
        cluster_dir, nodes=args.nodes, mode="netns", name="bscale", timeout=300, smoke=True
    )
    up_s = time.monotonic() - t0
    env = dict(cluster.env())
    conf = str(cluster.slurm_conf)
    shapes = [(args.nodes // 2, 1), (args.nodes, 1), (args.nodes, args.per_node)]
    results: dict[str, list[Run]] = {"steps": [], "agents": []}
    try:
        for nodes, per_node in shapes:
            for launcher in ("steps", "agents"):
                run = run_job(base, env, conf, Run(launcher, nodes, per_node), cluster.kill_wait)
                results[launcher].append(run)
                print(
                    f"  {launcher:6} {nodes:3} nodes x {per_node} = {run.instances:4} instances:"
                    f" launch {run.launch_s:6.2f}s  batch host {run.rss_mib:7.1f} MiB RSS"
                    f" {run.pss_mib:7.1f} MiB PSS ({run.srun_clients} srun procs;"
                    f" {run.rss_mib * 1024 / run.instances:6.0f} KiB/instance,"
                    f" {run.rss_mib * 1024 / run.nodes:6.0f} KiB/node)"
                    + f"  batch-host CPU {run.cpu_s:.2f}s"
                    + (
                        f"  agent on a node {run.agent_rss_mib:.1f} MiB, CPU {run.agent_cpu_s:.2f}s"
                        f" (every agent loaded {run.loaded_s:.2f}s after allocation)"
                        if run.agent_rss_mib
                        else ""
                    )
                    + "\n        "
                    f"  steps live {run.live_steps} created {run.created_steps}"
                    f"  teardown {run.teardown_s:.2f}s (gone {run.gone_s:.2f}s)"
                    f"  survivors {run.survivors}  exit {run.exit_code}"
                    + (f"  [{'; '.join(run.notes)}]" if run.notes else ""),
                    flush=True,
                )
    finally:
        if not args.cluster_dir:
            sc.down(cluster_dir)
        if not args.keep:
            subprocess.run(["rm", "-rf", str(base)], check=False)
    report(args, results, cluster.kill_wait, up_s)
    return 0


def report(args: Any, results: dict[str, list[Run]], kill_wait: float, up_s: float) -> None:
    print()
    print(
        f"cluster: {args.nodes} netns nodes (up in {up_s:.0f}s), KillWait {kill_wait:g}s,"
        f" {os.cpu_count()} CPUs, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') >> 30} GiB"
    )
    per = args.per_node
    big_nodes, big_inst = TARGET_NODES, TARGET_NODES * per
    for launcher, runs in results.items():
        if len(runs) != 3 or any(r.notes and not r.launch_s for r in runs):
            print(f"{launcher}: incomplete")
            continue
        if runs[2].instances == runs[1].instances:
            # --per-node 1: the dense shape repeats the full one (a second sample of it),
            # which leaves nothing to fit the per-instance slope from
            continue
        a, b, c = fit(runs, "rss_mib")
        pa, pb, pc = fit(runs, "pss_mib")
        la, lb, lc = fit(runs, "launch_s")
        ca, cb, cc = fit(runs, "cpu_s")
        ta, tb, tc = fit(runs, "teardown_s")
        print(
            f"{launcher}: teardown = {ta:.2f} s + {tb * 1000:.1f} ms/node + {tc * 1000:.1f}"
            f" ms/instance; at {big_nodes} x {per}: ~{ta + tb * big_nodes + tc * big_inst:,.1f} s"
            f" (KillWait {kill_wait:g} s)"
        )
        print(
            f"{launcher}: batch-host CPU to serving = {ca:.2f} s + {cb * 1000:.1f} ms/node"
            f" + {cc * 1000:.1f} ms/instance; at {big_nodes} x {per}:"
            f" ~{ca + cb * big_nodes + cc * big_inst:,.1f} CPU-s on the batch host"
        )
        print(
            f"{launcher}: batch-host RSS = {a:.1f} MiB + {b * 1024:.0f} KiB/node"
            f" + {c * 1024:.0f} KiB/instance (PSS: {pa:.1f} MiB + {pb * 1024:.0f} KiB/node"
            f" + {pc * 1024:.0f} KiB/instance)"
        )
        print(
            f"{launcher}: launch = {la:.2f} s + {lb * 1000:.1f} ms/node + {lc * 1000:.1f} ms/instance"
        )
        print(
            f"{launcher}: at {big_nodes} nodes x {per}: batch host ~{a + b * big_nodes + c * big_inst:,.0f}"
            f" MiB RSS ({pa + pb * big_nodes + pc * big_inst:,.0f} MiB PSS), launch"
            f" ~{la + lb * big_nodes + lc * big_inst:,.1f} s (linear; slurmctld's own"
            " limits not modelled)"
        )
    steps, agents = results["steps"], results["agents"]
    for s, g in zip(steps, agents, strict=False):
        if s.launch_s and g.launch_s:
            print(
                f"{s.nodes} x {s.per_node}: agents/steps launch {g.launch_s / s.launch_s:.2f}x,"
                f" memory {g.rss_mib / s.rss_mib:.3f}x RSS, batch-host CPU"
                f" {g.cpu_s / s.cpu_s if s.cpu_s else float('nan'):.2f}x; steps live {g.live_steps} vs"
                f" {s.live_steps}; teardown {g.teardown_s:.2f}s vs {s.teardown_s:.2f}s"
                f" (KillWait {kill_wait:g}s); survivors {g.survivors} / {s.survivors}"
            )


if __name__ == "__main__":
    sys.exit(main())
