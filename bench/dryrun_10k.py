"""`srt dry-run --json` on a generated 10,000-service recipe on 1,024 symbolic nodes.

Measured in one run, against the bare parse of the same file as the baseline:

(a) ``yaml.load(f, Loader=yaml.CSafeLoader)`` of the YAML recipe (the floor: the C parser);
(b) ``srt dry-run --json`` end to end on the YAML recipe, in-process (``main([...])`` with
    stdout sent to /dev/null) and as a subprocess (adds interpreter start-up and imports);
    target: (b) <= 1.15 x (a);
(c) everything after parsing, per service: the text is parsed, then
    ``check_document`` (models + plugin-aware checks), ``resolve`` (the plan) and
    ``Plan.to_json`` are timed separately; target: <= 50 us per service. (c) runs first,
    so it sees what a real ``srt dry-run`` sees, a process that has parsed one recipe;
    timed after the end-to-end runs, the same code reads about 1.5x higher, because of the
    fragmented heap those runs leave behind. The best of --runs further passes is printed
    too: what the code itself costs once the process's memory has settled. Each step
    includes the passes of the garbage collector its allocations trigger (srt pauses the
    collector inside each step, never beyond it, and freezes nothing).
(d) the floor under (c), in a fresh process that has parsed the same text, with the
    collector off: only C and Rust code, no srt logic: pydantic-core validating the recipe
    into its models, orjson building the plan's objects from the plan's own JSON, and orjson
    writing them back. No Python
    implementation of (c) can cost less, since it has to build the same models and an
    object graph holding the same plan. Printed with (c) as a multiple of it.

The JSON form of the same recipe (what generators should write) is measured too.

    .venv/bin/python bench/dryrun_10k.py [--services 10000] [--nodes 1024] [--runs 3] [--profile]

Prints numbers and ratios; asserts nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROLE_NODES = 16  # the engine: 16 aggregated workers of 8 GPUs, one node each
EXPORTERS = 2  # services on every node (placement: compute)


def generate(services: int, nodes: int) -> dict[str, Any]:
    """A recipe with ``services`` entries whose instances spread over ``nodes`` nodes.

    ``ROLE_NODES`` nodes run engine workers; every other node is owned by a one-node pool
    service; the remaining services ride on those pools round-robin (ports distinct per
    node so the port ledger passes), a few run on every node, a few on the head.
    """
    owners = nodes - ROLE_NODES
    head_services = 8
    riders = services - owners - EXPORTERS - head_services
    if riders < 0:
        raise SystemExit("--services must be at least --nodes")
    entries: list[dict[str, Any]] = []
    for i in range(owners):
        entries.append(
            {
                "name": f"pool-{i:04d}",
                "nodes": 1,
                "command": [
                    "python3",
                    "-m",
                    "trainer",
                    "--rank",
                    "{index}",
                    "--master",
                    "{pool_ip}",
                ],
                "env": {"NCCL_SOCKET_IFNAME": "ib0", "NODE_TAG": "{node}-{node_id}"},
                "readiness": {"log": {"pattern": "trainer ready"}, "timeout_seconds": 300},
            }
        )
    per_pool: dict[int, int] = {}
    for j in range(riders):
        k = j % owners
        slot = per_pool.get(k, 0)
        per_pool[k] = slot + 1
        port = 20000 + 2 * slot
        probe: dict[str, Any]
        if j % 3 == 0:
            probe = {"port": port}
        elif j % 3 == 1:
            probe = {"http": {"port": port, "path": "/health"}, "interval_seconds": 1}
        else:
            probe = {"log": {"pattern": f"listening on .*:{port}"}}
        entry: dict[str, Any] = {
            "name": f"side-{j:05d}",
            "command": ["python3", "-m", "sidecar", "--host", "{node_ip}", "--port", str(port)],
            "args": ["--job", "{job_name}", "--head", "{head_ip}"],
            "placement": {"pool": f"pool-{k:04d}"},
            "env": {"SIDECAR_ID": str(j), "CONFIG": '{"level": "info", "node": "{node}"}'},
            "readiness": probe,
        }
        if j % 5 == 0:
            entry["metrics"] = {"port": port + 1}
        if j % 7 == 0:
            entry["restart"] = {"policy": "always", "backoff_max_seconds": 30}
        entries.append(entry)
    for e in range(EXPORTERS):
        entries.append(
            {
                "name": f"exporter-{e}",
                "command": ["/usr/bin/exporter", "--listen", f"{{node_ip}}:{9100 + e}"],
                "placement": {"node": "compute"},
                "metrics": {"port": 9100 + e},
            }
        )
    for h in range(head_services):
        entries.append(
            {
                "name": f"head-{h}",
                "command": ["python3", "-m", "head_service", "--port", str(7000 + h)],
                "start": "before_workers",
                "critical": True,
                "readiness": {"port": 7000 + h},
            }
        )
    return {
        "schema": 2,
        "name": "bench-10k",
        "resources": {"gpus_per_node": 8},
        "frontend": {
            "type": "sglang",
            "command": ["python3", "-m", "router", "--port", "{frontend_port}"],
        },
        "roles": {
            "agg": {
                "workers": ROLE_NODES,
                "port": 30000,
                "command": ["python3", "-m", "sglang.launch_server", "--port", "{worker_port}"],
            }
        },
        "services": entries,
    }


def _timed(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    times = []
    result = None
    for _ in range(runs):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def _dry_run_in_process(path: str) -> None:
    from srt_services.cli.main import main

    sink = io.TextIOWrapper(open(os.devnull, "wb"))  # noqa: SIM115 - closed below
    try:
        with contextlib.redirect_stdout(sink), contextlib.suppress(SystemExit):
            main(["dry-run", path, "--json"])
    finally:
        sink.close()


def _dry_run_subprocess(path: str, env: dict[str, str]) -> None:
    out = subprocess.run(
        [sys.executable, "-I", "-m", "srt_services", "dry-run", path, "--json"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"srt dry-run failed: {out.stderr.decode()[-2000:]}")


_FLOOR = """
import gc, sys, time
gc.disable()  # the floor is what the C code costs; the collector is not part of it
import orjson
from srt_services.recipe.models import Recipe
from srt_services.recipe.source import parse_text
recipe, plan = sys.argv[1:3]
doc = parse_text(open(recipe, encoding="utf-8").read(), recipe)
blob = open(plan, "rb").read()
started = time.perf_counter()
Recipe.model_validate(doc.data)
orjson.dumps(orjson.loads(blob))
print(time.perf_counter() - started)
"""


def _floor(recipe: Path, plan: Path, env: dict[str, str]) -> float:
    out = subprocess.run(
        [sys.executable, "-I", "-c", _FLOOR, str(recipe), str(plan)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"floor run failed: {out.stderr[-2000:]}")
    return float(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--runs", type=int, default=3, help="runs of each measurement (median)")
    parser.add_argument("--profile", action="store_true", help="cProfile the after-parse part")
    args = parser.parse_args()

    # Only the built-ins: the recipe uses kind generic, and installed plugins must not add
    # implied services (exporters) to what is measured.
    os.environ["SRT_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["SRT_PLUGINS"] = ""
    from srt_services.checking.load import check_document
    from srt_services.contracts.allocation import AllocationRequest
    from srt_services.plan.resolve import resolve
    from srt_services.plugins.manager import PluginSet
    from srt_services.recipe.source import parse_text

    data = generate(args.services, args.nodes)
    tmp = Path(tempfile.mkdtemp(prefix="srt-bench-"))
    yaml_path = tmp / "recipe.yaml"
    json_path = tmp / "recipe.json"
    yaml_path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper, sort_keys=False, width=200))
    json_path.write_text(json.dumps(data, indent=1))
    n = args.services
    print(
        f"recipe: {n} services, {args.nodes} nodes; YAML {yaml_path.stat().st_size / 1e6:.1f} MB,"
        f" JSON {json_path.stat().st_size / 1e6:.1f} MB; libyaml: {yaml.__with_libyaml__}"
    )

    def bare_yaml() -> Any:
        with open(yaml_path, "rb") as fh:
            return yaml.load(fh, Loader=yaml.CSafeLoader)

    def bare_json() -> Any:
        import orjson

        return orjson.loads(json_path.read_bytes())

    # (c) first (see the docstring): parse, then the rest step by step
    text = yaml_path.read_text()
    t_parse, doc = _timed(lambda: parse_text(text, str(yaml_path)), args.runs)
    plugins = PluginSet(autoload=False)
    t_check, loaded = _timed(lambda: check_document(doc, plugins), args.runs)
    allocation = AllocationRequest(count=args.nodes).build(args.nodes)
    t_resolve, plan = _timed(lambda: resolve(loaded, plugins, allocation), args.runs)
    t_dump, blob = _timed(plan.to_json, args.runs)

    def after_parse() -> None:
        resolve(check_document(doc, plugins), plugins, allocation).to_json()

    # the same steps again, best of --runs: what the code itself costs once the heap has
    # settled, next to what a real `srt dry-run` (one fresh pass) sees above
    t_settled = min(_timed(after_parse, 1)[0] for _ in range(args.runs))
    # (a) and (b) start from a heap without (c)'s recipe and plan, as a real dry-run does:
    # kept, every pass of the collector during them would walk those objects too
    instances = sum(len(u.instances) for u in plan.units)
    del doc, loaded, plan
    gc.collect()
    t_yaml, _ = _timed(bare_yaml, args.runs)
    t_json, _ = _timed(bare_json, args.runs)
    t_e2e, _ = _timed(lambda: _dry_run_in_process(str(yaml_path)), args.runs)
    t_e2e_json, _ = _timed(lambda: _dry_run_in_process(str(json_path)), args.runs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    t_sub, _ = _timed(lambda: _dry_run_subprocess(str(yaml_path), env), max(1, args.runs - 1))
    plan_path = tmp / "plan.json"
    plan_path.write_bytes(blob)
    t_floor = statistics.median(_floor(yaml_path, plan_path, env) for _ in range(args.runs))

    after = t_check + t_resolve + t_dump

    print()

    def vs_parse(label: str, seconds: float, note: str = "") -> None:
        print(f"{label:42s} {seconds:8.3f} s   = {seconds / t_yaml:.2f}x (a){note}")

    def per_service(label: str, seconds: float, note: str = "") -> None:
        print(f"{label:42s} {seconds:8.3f} s   {seconds / n * 1e6:6.1f} us/service{note}")

    print(f"{'(a) yaml.load(CSafeLoader)':42s} {t_yaml:8.3f} s")
    print(f"{'    orjson.loads (JSON recipe)':42s} {t_json:8.3f} s")
    vs_parse("(b) srt dry-run --json, in-process, YAML", t_e2e, "   target <= 1.15x")
    vs_parse("    srt dry-run --json, subprocess, YAML", t_sub)
    vs_parse("    srt dry-run --json, in-process, JSON", t_e2e_json)
    vs_parse("    parse_text (srt's YAML parse)", t_parse)
    per_service("(c) check_document", t_check)
    per_service(f"    resolve ({instances} instances)", t_resolve)
    per_service(f"    Plan.to_json ({len(blob) / 1e6:.1f} MB)", t_dump)
    per_service("    after parsing, total", after, "   target <= 50 us")
    per_service("    after parsing, best once settled", t_settled)
    per_service(
        "(d) floor: models + plan objects, C only", t_floor, f"   (c) = {after / t_floor:.2f}x"
    )

    if args.profile:
        import cProfile
        import pstats

        doc = parse_text(text, str(yaml_path))
        prof = cProfile.Profile()
        prof.enable()
        loaded = check_document(doc, plugins)
        plan = resolve(loaded, plugins, allocation)
        plan.to_json()
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)

    for p in (yaml_path, json_path, plan_path):
        p.unlink()
    tmp.rmdir()


if __name__ == "__main__":
    main()
