"""Compare what srt_srtctl builds with what srtctl itself built (the oracle's JSON, doc §16).

Shared by the parametrized test and by `python -m` style summaries: one function returns, per
compared field, the mismatches of one variant.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from srt_srtctl.dynamo_install import dynamo_install_command
from srt_srtctl.loader import load_recipe_file
from srt_srtctl.plan import JobPlan, build_job

HERE = Path(__file__).parent
FIELDS = (
    "node_count",
    "node_roles",
    "workers",
    "process_list",
    "argv",
    "env",
    "env_sources",
    "env_unset",
    "bash_preamble",
    "command_line",
    "container_image",
    "container_mounts",
    "srun",
    "frontend_topology",
    "benchmark",
    "health_check",
    "infra_services",
    "warnings",
    "dynamo_install",
)


def data_dir() -> Path:
    """$SRTCTL_DATA, else the shared copy beside the repo, else the copy in tests/data."""
    env = os.environ.get("SRTCTL_DATA")
    if env:
        return Path(env)
    repo = HERE.parents[2]
    shared = repo.parent.parent / "shared" / "data" / "srtctl"
    for candidate in (repo / ".." / "shared" / "data" / "srtctl", shared):
        if (candidate / "expected").is_dir():
            return candidate.resolve()
    return HERE / "data"


def recipes() -> list[str]:
    root = data_dir() / "recipes"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.yaml"))


def load_expected(recipe: str) -> dict[str, Any]:
    path = data_dir() / "expected" / recipe
    data: dict[str, Any] = json.loads(path.with_suffix(".json").read_text())
    return data


def build_variants(recipe: str) -> Iterator[tuple[str | None, JobPlan | Exception]]:
    for loaded in load_recipe_file(data_dir() / "recipes" / recipe):
        try:
            yield loaded.variant.selector, build_job(loaded.config)
        except Exception as exc:  # reported as a mismatch of every field
            yield loaded.variant.selector, exc


def _worker(w: Any) -> dict[str, Any]:
    return {
        "role": w.role,
        "index": w.index,
        "node": w.node,
        "node_rank": w.node_rank,
        "gpu_indices": w.gpu_indices,
        "endpoint_nodes": w.endpoint_nodes,
        "sys_port": w.sys_port,
        "http_port": w.http_port,
        "bootstrap_port": w.bootstrap_port,
        "kv_events_port": w.kv_events_port,
        "nixl_port": w.nixl_port,
        "dp_rpc_port": w.dp_rpc_port,
        "is_leader": w.is_leader,
        "launch": w.launch,
    }


def compare(plan: JobPlan, exp: dict[str, Any]) -> dict[str, list[str]]:
    """Per field, human-readable mismatches (empty lists when equal)."""
    out: dict[str, list[str]] = {f: [] for f in FIELDS}

    def check(field: str, what: str, got: Any, want: Any) -> None:
        if got != want:
            out[field].append(f"{what}: got {got!r}, want {want!r}")

    check("node_count", "sbatch nodes", [plan.node_count], exp["summary"]["sbatch_nodes"])
    check("node_roles", "node_roles", plan.node_roles(), exp["node_roles"])
    want_procs = {p["name"]: p for p in exp["processes"]}
    got_procs = {p.name: p for p in plan.processes}
    check(
        "process_list",
        "processes",
        [p.name for p in plan.processes],
        [p["name"] for p in exp["processes"]],
    )
    for name, want in want_procs.items():
        got = got_procs.get(name)
        if got is None:
            continue
        check("argv", name, got.argv, want["argv"])
        check("env", name, got.env, want["env"])
        check("env_sources", name, got.env_sources, want["env_sources"])
        check("env_unset", name, got.env_unset, want["env_unset"])
        check("bash_preamble", name, got.bash_preamble, want["bash_preamble"])
        check("command_line", name, got.command_line(), want["srun_argv"][-1])
        check("container_image", name, got.container_image, want["container_image"])
        check("container_mounts", name, got.container_mounts, want["container_mounts"])
        srun = {
            "mpi": got.srun.mpi,
            "ntasks": got.srun.ntasks,
            "nodes": got.srun.nodes,
            "export_env": got.srun.export_env,
            "options": got.srun.options,
            "cpu_bind": got.srun.cpu_bind,
            "oversubscribe": got.srun.oversubscribe,
            "output": got.srun.output,
            "nodelist": ",".join(got.srun.nodelist),
        }
        argv = want["srun_argv"]
        want_srun = {k: want["srun"][k] for k in srun if k != "nodelist"}
        want_srun["nodelist"] = argv[argv.index("--nodelist") + 1]
        check("srun", name, srun, want_srun)
        if want.get("worker") or got.worker:
            w = want.get("worker") or {}
            check(
                "workers",
                name,
                _worker(got.worker) if got.worker else None,
                {k: w.get(k) for k in _worker(got.worker)} if got.worker else w,
            )
    ft = exp["frontend_topology"]
    topo = plan.topology.frontend
    check(
        "frontend_topology",
        "frontend_topology",
        {
            "frontend_nodes": topo.frontend_nodes,
            "frontend_port": topo.frontend_port,
            "nginx_node": topo.nginx_node,
            "public_port": topo.public_port,
        },
        ft,
    )
    b = exp["benchmark"]
    if plan.benchmark is None:
        out["benchmark"].append(f"no benchmark built; want {b['type']} ({plan.errors})")
    else:
        got_b = {
            "type": plan.benchmark.type,
            "client_node": plan.benchmark.client_node,
            "public_api_node": plan.benchmark.public_api_node,
        }
        check("benchmark", "benchmark", got_b, {k: b[k] for k in got_b})
        if "script_path" in b:
            check("benchmark", "script_path", plan.benchmark.script_path, b["script_path"])
    hc = exp["health_check"]
    w = hc["wait_for_model"]
    h = plan.health_check
    check(
        "health_check",
        "health_check",
        {
            "url": h.url,
            "host": h.host,
            "port": h.port,
            "n_prefill": h.n_prefill,
            "n_decode": h.n_decode,
            "timeout": h.timeout,
            "ready_rule": h.ready_rule,
            "max_attempts": h.max_attempts,
            "interval_seconds": h.interval_seconds,
            "frontend_type": h.frontend_type,
        },
        {
            "url": w["url"],
            "host": w["host"],
            "port": w["port"],
            "n_prefill": w["n_prefill"],
            "n_decode": w["n_decode"],
            "timeout": w["timeout"],
            "ready_rule": w["ready_rule"],
            "max_attempts": hc["max_attempts"],
            "interval_seconds": hc["interval_seconds"],
            "frontend_type": w["frontend_type"],
        },
    )
    infra = exp.get("infra_services")
    got_infra = plan.infra_services
    if infra is None or got_infra is None:
        check("infra_services", "infra_services", got_infra, infra)
    else:
        check("infra_services", "infra", got_infra, {k: infra[k] for k in got_infra})
    check("warnings", "warnings", plan.warnings, exp["warnings"])
    installs = plan.config.frontend.type == "dynamo" and plan.config.dynamo.install
    got_install = dynamo_install_command(plan.config.dynamo) if installs else None
    check("dynamo_install", "dynamo_install", got_install, exp["dynamo_install"]["command"])
    return out


def summary() -> tuple[dict[str, int], dict[str, list[str]], int]:
    """(mismatch count per field, examples per field, variant count) over every recipe."""
    counts = dict.fromkeys(FIELDS, 0)
    examples: dict[str, list[str]] = {f: [] for f in FIELDS}
    total = 0
    for recipe in recipes():
        expected = {v["selector"]: v for v in load_expected(recipe)["variants"]}
        for selector, plan in build_variants(recipe):
            if selector not in expected:
                continue
            total += 1
            if isinstance(plan, Exception):
                for f in FIELDS:
                    counts[f] += 1
                    examples[f].append(f"{recipe}[{selector}]: {plan!r}")
                continue
            for f, problems in compare(plan, expected[selector]).items():
                if problems:
                    counts[f] += 1
                    examples[f].append(f"{recipe}[{selector}]: {problems[0]}")
    return counts, examples, total


if __name__ == "__main__":
    import sys

    counts, examples, total = summary()
    show = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    for f in FIELDS:
        print(f"{f:18s} {total - counts[f]:3d}/{total} match")
        for e in examples[f][:show]:
            print("    ", e[:1500])
